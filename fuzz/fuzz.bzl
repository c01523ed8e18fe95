"""omni_fuzz_test: one fuzz target, as a test of the default build and as a
libFuzzer binary under --config=fuzz."""

def omni_fuzz_test(name, srcs, deps = [], mutations = 1000, size = "small", **kwargs):
    """A fuzz target (srcs define LLVMFuzzerTestOneInput) and its seed corpus.

    The corpus is every file under corpus/<name>/. Under the default build the
    test links //fuzz:replay_main and runs the corpus, then `mutations`
    deterministic mutations of it (a bounded run inside `bazel test //...`).
    Under --config=fuzz (--define=omnistage_fuzz=libfuzzer) it links
    libFuzzer's own main instead: bazel-bin/fuzz/<name> is then a libFuzzer
    binary (fuzz/run_fuzzers.sh runs it), and the test replays the corpus.
    """
    corpus = name + "_corpus"
    native.filegroup(
        name = corpus,
        srcs = native.glob(["corpus/%s/*" % name]),
    )
    native.cc_test(
        name = name,
        size = size,
        srcs = srcs,
        # libFuzzer ignores flags that start with "--".
        args = ["--mutations=%d" % mutations, "$(locations :%s)" % corpus],
        data = [":" + corpus],
        linkopts = select({
            "//fuzz:libfuzzer": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        deps = deps + [
            "//fuzz:fuzz_check",
        ] + select({
            "//fuzz:libfuzzer": [],
            "//conditions:default": ["//fuzz:replay_main"],
        }),
        **kwargs
    )
