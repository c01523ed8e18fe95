#!/usr/bin/env bash
# POST /v1/audio/transcriptions through the gateway, as real processes on
# loopback: an orchestrator of pipelines/local_listener.yaml (pocketsphinx) as
# the gateway's --transcription_orchestrator. Sentences spoken by espeak-ng
# (speak_pcm), encoded by Debian's ffmpeg as wav, flac, ogg (opus, vorbis) and
# mp3 at their own rates and channel counts, are heard: the word error rate of
# each is printed, and over all must stay under MAX_WER. A two-sentence upload
# comes back in every response format, its segments and words timed where
# espeak-ng spoke (srt, vtt, verbose_json), and streamed as
# transcript.text.delta events ending in transcript.text.done. Refusals are
# 4xx in OpenAI's shape naming the field — a file that is not audio, a
# truncated one, a 0-second one, one over the 25 MiB cap (413), an unknown
# model, no file — and nothing is left in flight afterwards; a gateway
# without a listening pipeline answers 404 saying how to get one.
# Stops what it starts, by PID.
set -euo pipefail
source orchestrator/testing/orchestrator_process.sh
source gateway/transcription_setup.sh
# The same speaker as the listener's own tests, with its channel mean.
# Measured 38/120 = 0.32 over the five formats; the bound leaves a few words
# of margin for a changed model, not for noise (the same upload is heard the
# same every time).
MAX_WER=0.38

start_listening
base="http://127.0.0.1:$gw_port"
speak_sentences

# transcribe NAME FILE [CURL_FORM_ARGS...]: the status on stdout, the body in $out/NAME.
transcribe() {
  local name="$1" file="$2"
  shift 2
  curl -s -D "$out/$name.headers" -o "$out/$name" -w '%{http_code}' "$base/v1/audio/transcriptions" \
    -F "file=@$file" -F model=whisper-1 "$@"
}

# Every upload format, at rates and channel counts of their own.
: >"$out/scores"
for spec in "wav -ar 44100 -ac 2" "flac -ar 48000" "ogg -c:a libopus -ar 48000" \
  "oga -c:a libvorbis -ar 22050 -ac 2" "mp3 -c:a libmp3lame -ar 22050"; do
  read -r ext flags <<<"$spec"
  for i in 0 1 2; do
    # shellcheck disable=SC2086
    encode "$out/s$i.pcm" "s$i.$ext" $flags
    [ "$(transcribe "s$i.$ext.json" "$out/s$i.$ext")" = 200 ] ||
      fail "$ext: $(cat "$out/s$i.$ext.json")"
    grep -qi '^Content-Type: application/json' "$out/s$i.$ext.json.headers" || fail "$ext: not json"
    /usr/bin/python3 - "$out/s$i.$ext.json" "${sentences[$i]}" "$ext" >>"$out/scores" <<'PY'
import json, re, sys
heard = json.load(open(sys.argv[1]))
words = lambda s: re.sub(r"[^a-z' ]", " ", s.lower()).split()
ref, hyp = words(sys.argv[2]), words(heard["text"])
d = list(range(len(hyp) + 1))
for i, r in enumerate(ref, 1):
    prev, d[0] = d[0], i
    for j, h in enumerate(hyp, 1):
        prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (r != h))
assert heard["usage"]["type"] == "duration" and heard["usage"]["seconds"] >= 1, heard
print(sys.argv[3], d[len(hyp)], len(ref), heard["text"], sep="\t")
PY
  done
done
cat "$out/scores"
/usr/bin/python3 - "$out/scores" "$MAX_WER" <<'PY' || fail "the word error rate is over the bound"
import sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
by = {}
for fmt, edits, words, _ in rows:
    e, w = by.get(fmt, (0, 0))
    by[fmt] = (e + int(edits), w + int(words))
for fmt, (e, w) in by.items():
    print(f"word error rate, {fmt}: {e}/{w} = {e / w:.2f}")
edits, words = sum(e for e, _ in by.values()), sum(w for _, w in by.values())
print(f"word error rate, all: {edits}/{words} = {edits / words:.2f} (bound {sys.argv[2]})")
sys.exit(0 if edits / words <= float(sys.argv[2]) else 1)
PY

# Two sentences, 1.5 s of silence between them: two segments, timed.
encode "$out/two.pcm" two.wav
first_end=$(($(wc -c <"$out/s0.pcm") * 1000 / 48000))
second_start=$((first_end + 1500))
[ "$(transcribe two.verbose "$out/two.wav" -F response_format=verbose_json \
  -F 'timestamp_granularities[]=word' -F 'timestamp_granularities[]=segment')" = 200 ] ||
  fail "verbose_json: $(cat "$out/two.verbose")"
/usr/bin/python3 - "$out/two.verbose" "$first_end" "$second_start" <<'PY' || fail "verbose_json: $(cat "$out/two.verbose")"
import json, sys
v = json.load(open(sys.argv[1]))
first_end, second_start = int(sys.argv[2]) / 1000, int(sys.argv[3]) / 1000
segments = v["segments"]
assert v["task"] == "transcribe" and v["language"] == "english", v
assert len(segments) == 2, segments
# speak_pcm puts 0.3 s of silence around each sentence.
assert 0.2 < segments[0]["start"] < 0.6, segments[0]
assert first_end - 0.6 < segments[0]["end"] < first_end, segments[0]
assert second_start + 0.2 < segments[1]["start"] < second_start + 0.6, segments[1]
assert abs(v["duration"] - (second_start + 3)) < 3, v["duration"]
words = v["words"]
assert len(words) >= 8 and all(w["start"] < w["end"] for w in words), words
assert all(a["end"] <= b["start"] + 1e-9 for a, b in zip(words, words[1:])), words
assert " ".join(w["word"] for w in words) == v["text"], (words, v["text"])
print("verbose_json:", [(s["start"], s["end"], s["text"]) for s in segments])
PY
for format in srt vtt text json; do
  [ "$(transcribe "two.$format" "$out/two.wav" -F response_format=$format)" = 200 ] ||
    fail "$format: $(cat "$out/two.$format")"
done
grep -qi '^Content-Type: text/plain' "$out/two.srt.headers" || fail "srt: not text/plain"
grep -qi '^Content-Type: text/vtt' "$out/two.vtt.headers" || fail "vtt: not text/vtt"
/usr/bin/python3 - "$out" <<'PY' || fail "srt/vtt/text/json disagree: $(cat "$out/two.srt" "$out/two.vtt")"
import json, re, sys
d = sys.argv[1]
text = json.load(open(d + "/two.json"))["text"]
assert open(d + "/two.text").read() == text + "\n"
srt = open(d + "/two.srt").read()
cues = re.findall(r"(\d+)\n(\d\d:\d\d:\d\d,\d\d\d) --> (\d\d:\d\d:\d\d,\d\d\d)\n(.+)\n\n", srt)
assert [c[0] for c in cues] == ["1", "2"] and " ".join(c[3] for c in cues) == text, cues
vtt = open(d + "/two.vtt").read()
assert vtt.startswith("WEBVTT\n\n"), vtt
vcues = re.findall(r"(\d\d:\d\d:\d\d\.\d\d\d) --> (\d\d:\d\d:\d\d\.\d\d\d)\n(.+)\n\n", vtt)
assert [(a.replace(".", ","), b.replace(".", ","), t) for a, b, t in vcues] == [c[1:] for c in cues]
print("srt:", cues)
PY

# Streamed: a delta per utterance, then done with the whole text.
[ "$(transcribe two.sse "$out/two.wav" -F stream=true)" = 200 ] || fail "stream: $(cat "$out/two.sse")"
grep -qi '^Content-Type: text/event-stream' "$out/two.sse.headers" || fail "stream: not an event stream"
/usr/bin/python3 - "$out/two.sse" "$out/two.json" <<'PY' || fail "stream: $(cat "$out/two.sse")"
import json, sys
events = [json.loads(l[6:]) for l in open(sys.argv[1]) if l.startswith("data: ")]
types = [e["type"] for e in events]
assert types[-1] == "transcript.text.done" and set(types[:-1]) == {"transcript.text.delta"}, types
assert len(types) == 3, types
deltas = "".join(e["delta"] for e in events[:-1])
assert deltas == events[-1]["text"] == json.load(open(sys.argv[2]))["text"], (deltas, events[-1])
print("stream:", types)
PY

# refused NAME STATUS PARAM [CURL_ARGS...]: the status, and OpenAI's error naming PARAM.
refused() {
  local name="$1" status="$2" param="$3" code
  shift 3
  code=$(curl -s -o "$out/$name.refused" -w '%{http_code}' "$base/v1/audio/transcriptions" "$@")
  [ "$code" = "$status" ] || fail "$name: HTTP $code, expected $status: $(cat "$out/$name.refused")"
  grep -q "\"param\":\"$param\"" "$out/$name.refused" ||
    fail "$name: does not name $param: $(cat "$out/$name.refused")"
  echo "$name: $code $(cat "$out/$name.refused")"
}
echo "not audio at all" >"$out/notes.txt"
head -c $(($(wc -c <"$out/two.wav") / 2)) "$out/two.wav" >"$out/half.wav"
encode /dev/null empty.wav
head -c $((25 * 1024 * 1024 + 1)) /dev/zero >"$out/big.wav"
refused not_audio 400 file -F "file=@$out/notes.txt" -F model=whisper-1
refused truncated 400 file -F "file=@$out/half.wav" -F model=whisper-1
refused empty 400 file -F "file=@$out/empty.wav" -F model=whisper-1
refused too_big 413 file -F "file=@$out/big.wav" -F model=whisper-1
refused unknown_model 404 model -F "file=@$out/two.wav" -F model=tts-1
refused no_file 400 file -F model=whisper-1
refused bad_format 400 response_format -F "file=@$out/two.wav" -F model=whisper-1 -F response_format=mp3
grep -q 'truncated' "$out/truncated.refused" || fail "the truncated file is not called so"

# Nothing left in flight on the orchestrator.
expect_idle "$metrics"

# A gateway without a listening pipeline says how to get one.
start_gateway plain
code=$(curl -s -o "$out/plain.json" -w '%{http_code}' "http://127.0.0.1:$gw_port/v1/audio/transcriptions" \
  -F "file=@$out/two.wav" -F model=whisper-1)
[ "$code" = 404 ] || fail "no listening pipeline: HTTP $code"
grep -q -- '--transcription_orchestrator' "$out/plain.json" || fail "the 404 does not say how: $(cat "$out/plain.json")"
echo "PASS"
