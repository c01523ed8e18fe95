#include "common/playback_metrics.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(PlaybackMetricsTest, EverySeriesExistsFromTheStartWithoutLabels) {
  MetricsRegistry registry;
  PlaybackMetrics heard(&registry, "omnistage");
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("omnistage_time_to_first_audio_seconds_count 0"));
  EXPECT_THAT(text, HasSubstr("omnistage_audio_real_time_factor_count 0"));
  EXPECT_THAT(text, HasSubstr("omnistage_audio_responses_total{stalled=\"false\"} 0"));
  EXPECT_THAT(text, HasSubstr("omnistage_audio_responses_total{stalled=\"true\"} 0"));
  EXPECT_THAT(text, HasSubstr("omnistage_playback_stalls_total 0"));
  EXPECT_THAT(text, HasSubstr("omnistage_playback_stalled_seconds_total 0"));
  EXPECT_THAT(text, HasSubstr("omnistage_audio_seconds_total 0"));
}

TEST(PlaybackMetricsTest, CountsRequestsWithAudioUnderTheirLabels) {
  MetricsRegistry registry;
  PlaybackMetrics heard(&registry, "omnistage_gateway", {"route"});
  heard.Heard({"/v1/audio/speech"}, PlaybackFigures{});  // No audio: nowhere.
  EXPECT_THAT(registry.Render(), Not(HasSubstr("route=")));

  PlaybackFigures stalled;
  stalled.first_audio_seconds = 0.3;
  stalled.real_time_factor = 0.9;
  stalled.stalls = 2;
  stalled.stalled_seconds = 0.25;
  stalled.audio_seconds = 4;
  heard.Heard({"/v1/audio/speech"}, stalled);
  PlaybackFigures smooth = stalled;
  smooth.stalls = 0;
  smooth.stalled_seconds = 0;
  heard.Heard({"/v1/audio/speech"}, smooth);

  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("omnistage_gateway_time_to_first_audio_seconds_count{route="
                              "\"/v1/audio/speech\"} 2"));
  EXPECT_THAT(text, HasSubstr("omnistage_gateway_audio_real_time_factor_bucket{route="
                              "\"/v1/audio/speech\",le=\"1\"} 2"));
  EXPECT_THAT(text, HasSubstr("omnistage_gateway_audio_real_time_factor_bucket{route="
                              "\"/v1/audio/speech\",le=\"0.85\"} 0"));
  EXPECT_THAT(text, HasSubstr("omnistage_gateway_audio_responses_total{route="
                              "\"/v1/audio/speech\",stalled=\"true\"} 1"));
  EXPECT_THAT(text, HasSubstr("omnistage_gateway_audio_responses_total{route="
                              "\"/v1/audio/speech\",stalled=\"false\"} 1"));
  EXPECT_THAT(text, HasSubstr("omnistage_gateway_playback_stalls_total{route="
                              "\"/v1/audio/speech\"} 2"));
  EXPECT_THAT(text, HasSubstr("omnistage_gateway_playback_stalled_seconds_total{route="
                              "\"/v1/audio/speech\"} 0.25"));
  EXPECT_THAT(text, HasSubstr("omnistage_gateway_audio_seconds_total{route="
                              "\"/v1/audio/speech\"} 8"));
}

}  // namespace
}  // namespace omnistage
