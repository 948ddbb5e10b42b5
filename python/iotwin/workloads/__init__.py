"""Real applications iotwin can run and capture: throwaway database servers and their
benchmark clients, used by the sample, the tests and the benchmarks."""
