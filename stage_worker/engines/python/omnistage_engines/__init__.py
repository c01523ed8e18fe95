"""Reference stage engines written in Python, run by the stage worker's
`engine: python` (stage_worker/engines/python/python_engine.h).

sim_llm.SimLlm is a port of the C++ `sim_llm` engine: the same tokens for the
same input and seed, with the same parameters. batching.Batching is
the continuous-batching base it shares with any engine written the same way.
"""
