// The speaker the listener's tests stand in for a person with: espeak-ng's
// en-us voice in its Klatt-synthesizer variant, the one pocketsphinx's en-us
// model hears best of those tried on the tuning sentences (docs/engines.md,
// "listener": the default variant scores 0.61 on them, klatt 0.22), and that
// voice's cepstral mean through the listener's resampler, measured as
// docs/engines.md says on the tuning sentences, not on the test's: what a
// deployment tells the listener of its microphones (engine parameter
// cmn_init). Space-separated, as a pipeline config needs it (a spawned
// worker's engine parameters travel as one comma-separated flag).
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_TESTING_TEST_SPEAKER_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_TESTING_TEST_SPEAKER_H_

namespace omnistage {

inline constexpr char kTestSpeakerVoice[] = "en-us";
inline constexpr char kTestSpeakerVariant[] = "klatt";
inline constexpr char kTestSpeakerChannelMean[] =
    "59.5 12.4 -15.6 17.5 -16.9 2.4 -6.3 -17.3 4.1 -12.4 5.4 -4.6 -1.9";

// The sentences the listener is scored on: no setting was chosen by its score
// on these (the tuning sentences are the listener test's own).
inline constexpr const char* kTestSentences[] = {
    "The quick brown fox jumps over the lazy dog.",
    "I would like a cup of coffee please.",
    "What time does the train leave tomorrow morning?",
    "Please call me back when you get home.",
    "The weather is nice today and the sun is shining.",
    "Can you tell me the way to the station?",
    "We are going to the park after lunch.",
    "My brother works at the hospital in the city.",
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_TESTING_TEST_SPEAKER_H_
