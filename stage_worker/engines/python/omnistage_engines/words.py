"""sim_llm's token -> word list: the C++ AllWords() (stage_worker/engines/models/words.cc),
in the same order, so both engines print the same text."""

ALL_WORDS = (
    "the", "a", "every", "one", "that", "this", "quiet", "bright", "small", "ancient",
    "gentle", "curious", "silver", "hidden", "warm", "distant", "golden", "patient", "swift",
    "simple", "open", "careful", "green", "steady", "clever", "old", "new", "calm", "vast",
    "tiny", "river", "garden", "engine", "forest", "city", "signal", "mountain", "window",
    "teacher", "machine", "village", "bridge", "lantern", "story", "ocean", "model", "stage",
    "network", "harbor", "cloud", "library", "path", "song", "field", "pipeline", "voice",
    "map", "letter", "island", "clock", "road", "idea", "sings", "waits", "listens", "travels",
    "grows", "answers", "builds", "remembers", "follows", "carries", "watches", "learns",
    "speaks", "returns", "shines", "turns", "finds", "holds", "opens", "moves", "rests",
    "changes", "gathers", "explains", "softly", "slowly", "quickly", "gladly", "always",
    "often", "quietly", "easily", "again", "together", "near", "beyond", "under", "across",
    "with", "beside", "through", "above", "around", "toward",
)
