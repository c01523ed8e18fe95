# Sourced by transcription_test.sh and transcription_sdk_test.sh, after
# orchestrator/testing/orchestrator_process.sh: the listening pipeline and the
# gateway in front of it, and the test's speech.
#
#   start_listening   an orchestrator of pipelines/local_listener.yaml that hears
#                     the test speaker (its channel mean), the gateway with it as
#                     --transcription_orchestrator; sets $metrics, $gw_port, $pids
#                     (killed when the test exits)
#   speak_sentences   $out/s0.pcm .. s2.pcm: ${sentences[@]} spoken by espeak-ng
#                     (speak_pcm: 24 kHz mono), and $out/two.pcm: the first two
#                     with 1.5 s of silence between them
#   encode IN FILE FLAGS...   24 kHz mono PCM IN -> $out/FILE, with ffmpeg's
#                     output FLAGS
sentences=("I would like a cup of coffee please." "What time does the train leave tomorrow morning?"
  "Please call me back when you get home.")

start_listening() {
  with_test_speaker pipelines/local_listener.yaml "$out/listener.yaml"
  start_orchestrator "$out/listener.yaml" --metrics_listen=127.0.0.1:0
  metrics=$(metrics_url)
  pids="$pid"
  trap 'kill -KILL $pids 2>/dev/null; wait $pids 2>/dev/null || true' EXIT
  start_gateway gw --transcription_orchestrator="127.0.0.1:$port"
}

speak_sentences() {
  local i
  for i in "${!sentences[@]}"; do
    stage_worker/engines/testing/speak_pcm "$out/s$i.pcm" "${sentences[$i]}" || fail "speak_pcm $i"
  done
  head -c $((24000 * 2 * 3 / 2)) /dev/zero >"$out/gap.pcm"
  cat "$out/s0.pcm" "$out/gap.pcm" "$out/s1.pcm" >"$out/two.pcm"
}

encode() {
  local in="$1" file="$2"
  shift 2
  ffmpeg -v error -y -f s16le -ar 24000 -ac 1 -i "$in" "$@" "$out/$file" || fail "ffmpeg $file"
}
