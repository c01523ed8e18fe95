#!/usr/bin/env bash
# The orchestrator in local mode, as processes: it spawns its workers, restarts
# one that is killed (a new incarnation, re-admitted), refuses to start on a taken
# port with a clear message, and leaves no worker behind after SIGTERM. What only
# the workers can check (the engine, its parameters, the stage defaults) stops
# start-up with the config file and field named, and leaves no worker behind.
set -euo pipefail

omni=client/omni
source orchestrator/testing/orchestrator_process.sh

# refused <name> <stage yaml> <expected message after "<file>: ">
refused() {
  local config="$out/$1.yaml"
  printf 'stages:\n  - {name: llm, replicas: 2, final_output: true, output_modality: tokens, %s}\n' \
    "$2" >"$config"
  set +e
  orchestrator/orchestrator --config="$config" --listen=127.0.0.1:0 \
    --stage_worker=stage_worker/stage_worker >"$out/$1.out" 2>"$out/$1.err" &
  local child=$!
  wait "$child"
  local rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "$1: exit code $rc: $(cat "$out/$1.err")"
  grep -qF "orchestrator: $config: $3" "$out/$1.err" ||
    fail "$1: expected '$config: $3' in: $(cat "$out/$1.err")"
  if pgrep -f -- "--instance_id=llm-[0-9]-$child-" >/dev/null; then
    fail "$1: a worker outlived the refused start-up"
  fi
  echo "refused as expected: $1"
}
refused bad_param "engine: sim_llm, engine_params: {batch_size: x}" \
  "stages[0].engine_params.batch_size: engine sim_llm: parameter batch_size: expected an integer in [1, 65536], got 'x' (stage 0 (llm) replica 0 refused to start)"
refused unknown_param "engine: sim_llm, engine_params: {bach_size: 4}" \
  "stages[0].engine_params.bach_size: engine sim_llm: unknown parameter 'bach_size'"
refused unknown_engine "engine: gpt" \
  "stages[0].engine: unknown engine 'gpt' (known: sim_llm, listener, thinker, talker, vocoder, python)"
refused bad_defaults "engine: sim_llm, defaults: {extra: {colour: red}}" \
  "stages[0].defaults.extra.colour: refused the session: stage defaults: engine sim_llm: unknown extra parameter 'colour'"
# The same for a Python engine (sim_llm's Python port): the module, the class,
# a method, a parameter, and stage defaults its validate refuses.
py="path: stage_worker/engines/python, module: omnistage_engines.sim_llm"
refused py_module "engine: python, engine_params: {path: stage_worker/engines/python, module: no_such_module, class: SimLlm}" \
  "stages[0].engine_params.module: engine python: cannot import module 'no_such_module': ModuleNotFoundError: No module named 'no_such_module' (stage 0 (llm) replica 0 refused to start)"
refused py_class "engine: python, engine_params: {$py, class: Nope}" \
  "stages[0].engine_params.class: engine python: module 'omnistage_engines.sim_llm' has no class 'Nope'"
refused py_method "engine: python, engine_params: {path: stage_worker/engines/python, module: omnistage_engines.params, class: Params}" \
  "stages[0].engine_params.class: engine python: class omnistage_engines.params.Params has no method 'validate'"
refused py_param "engine: python, engine_params: {$py, class: SimLlm, batch_size: x}" \
  "stages[0].engine_params.batch_size: engine python: omnistage_engines.sim_llm.SimLlm(params) raised ParamError: engine sim_llm: parameter batch_size: expected an integer in [1, 65536], got 'x'"
# Without Python's standard library the interpreter cannot start: a refusal, not a crash.
PYTHONHOME="$out/no_python_here" refused py_home "engine: python, engine_params: {$py, class: SimLlm}" \
  "stages[0].engine_params: engine python: the Python interpreter did not start (is Python 3.11's standard library installed? Debian: libpython3.11-stdlib)"
refused py_defaults "engine: python, engine_params: {$py, class: SimLlm}, defaults: {extra: {colour: red}}" \
  "stages[0].defaults.extra.colour: refused the session: stage defaults: engine sim_llm: unknown extra parameter 'colour'"

# A flat install (both binaries in one folder, as in an image) finds its workers
# without --stage_worker.
flat="$out/flat"
mkdir -p "$flat"
cp orchestrator/orchestrator stage_worker/stage_worker "$flat/"
"$flat/orchestrator" --config=pipelines/local_sim.yaml --listen=127.0.0.1:0 \
  >"$out/flat.out" 2>"$out/flat.err" &
flat_pid=$!
for _ in $(seq 1 300); do
  grep -q 'listening port=' "$out/flat.out" && break
  sleep 0.1
done
grep -q 'listening port=' "$out/flat.out" || { kill -KILL $flat_pid; fail "flat install: $(cat "$out/flat.err")"; }
kill -TERM $flat_pid
wait $flat_pid || fail "flat install: exit code $?"
echo "flat install: started its workers and stopped"

start_orchestrator pipelines/local_sim.yaml

instance() { "$omni" status --json "$server" | sed -n 's/.*"instanceId": "\([^"]*\)".*/\1/p' | head -1; }
alive() { grep -q '"alive": true' <<<"$("$omni" status --json "$server")"; }

first=$(instance)
[ -n "$first" ] || fail "no instance id in status"
worker=$(pgrep -P "$pid" -f stage_worker | head -1)
[ -n "$worker" ] || fail "no spawned worker"

# A second orchestrator on the same port: exit code 2 and a message, no crash.
set +e
orchestrator/orchestrator --config=pipelines/local_sim.yaml \
  --listen="127.0.0.1:$port" --stage_worker=stage_worker/stage_worker >/dev/null 2>"$out/taken"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "taken port: exit code $rc: $(cat "$out/taken")"
grep -q "cannot listen on 127.0.0.1:$port" "$out/taken" || fail "taken port message: $(cat "$out/taken")"
# One line, before anything was spawned (no worker started and stopped again).
[ "$(wc -l <"$out/taken")" -eq 1 ] || fail "taken port: more than one line: $(cat "$out/taken")"

kill -KILL "$worker"
restarted=""
for _ in $(seq 1 100); do
  now=$(instance)
  if [ -n "$now" ] && [ "$now" != "$first" ] && alive; then restarted="$now"; break; fi
  sleep 0.1
done
[ -n "$restarted" ] || fail "killed worker was not restarted and re-admitted (still '$first')"
echo "restarted: $first -> $restarted"
"$omni" generate "$server" --prompt="after restart" --wav= >"$out/text" 2>"$out/err" ||
  fail "generate after restart: $(cat "$out/err")"

children=$(pgrep -P "$pid" -d' ' -f stage_worker || true)
stop_orchestrator
for child in $children; do
  if kill -0 "$child" 2>/dev/null; then fail "worker $child outlived the orchestrator"; fi
done

# The shipped Python pipeline: spawned Python workers stream text (words
# of sim_llm's word list).
start_orchestrator pipelines/local_python.yaml
"$omni" generate "$server" --prompt="hello" --wav= >"$out/py_text" 2>"$out/py_err" ||
  fail "generate through the Python stage: $(cat "$out/py_err")"
words=$(wc -w <"$out/py_text")
[ "$words" -ge 8 ] || fail "Python stage wrote '$(cat "$out/py_text")'"
children=$(pgrep -P "$pid" -d' ' -f stage_worker || true)
stop_orchestrator
for child in $children; do
  if kill -0 "$child" 2>/dev/null; then fail "worker $child outlived the orchestrator"; fi
done
echo "3 passed, 0 failed"
