"""Reference stage engines written in Python, run by the stage worker's
`engine: python` (stage_worker/engines/python/python_engine.h).

sim_llm.SimLlm is a port of the C++ `sim_llm` engine: the same tokens for the
same input and seed, the same parameters and fault knobs. batching.Batching is
the continuous-batching base it shares with any engine written the same way.
"""
