"""process_test: the stanza of a multi-process test of tests/."""

def _union(first, second):
    return first + [item for item in second if item not in first]

def process_test(name, srcs = None, deps = [], data = [], size = "medium", **kwargs):
    """A cc_test against real orchestrator and stage_worker processes built here.

    The binaries come as data; the test starts and stops them with
    tests/pipeline_harness.h (each by PID, whatever the outcome).

    Args:
      name: the test; its source is NAME.cc unless srcs says otherwise.
      srcs: the test's sources.
      deps: what it needs beyond the harness, absl and gtest_main.
      data: what it runs beyond the orchestrator and the stage worker.
      size: Bazel's test size.
      **kwargs: the rest of cc_test's attributes.
    """
    native.cc_test(
        name = name,
        size = size,
        srcs = srcs if srcs != None else [name + ".cc"],
        data = _union(["//orchestrator", "//stage_worker"], data),
        deps = _union([
            ":pipeline_harness",
            ":pipeline_test_util",
            "//bazel:absl",
            "//bazel:gtest_main",
        ], deps),
        **kwargs
    )
