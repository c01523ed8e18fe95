// The batch gateway: a gateway container passing --batch_database, which keeps
// the Files and Batch APIs (docs/openai.md#batches) in one SQLite file that
// only one process may use. Checked: it runs as a StatefulSet of one replica;
// the file is on a writable PersistentVolumeClaim (SQLite writes the file and
// its -wal and -shm next to it, and the container's root filesystem is
// read-only or lost with the pod); with orchestrators that take tokens, it has
// a token of its own (--batch_token_file) that their tokens file gives role
// gateway; and no Service sends its clients both to it and to a gateway
// without the store, where /v1/files and /v1/batches answer 404.
import { parse as parseYaml } from "yaml";

// Whether container flags are a gateway's (it dials an orchestrator and is
// neither an orchestrator nor a stage worker).
export const isGatewayFlags = (flags) => flags.has("orchestrator") && !flags.has("config") && !flags.has("stage_id");

// The database: where it lives and how many processes may open it.
export function checkBatchStore({ w, c, ci, flags, mountOf, report }) {
  const path = flags.get("batch_database");
  const at = `spec.template.spec.containers[${ci}].args`;
  const kind = w.obj.kind;
  if (kind !== "StatefulSet") {
    report(w.obj, "kind", `${kind}: --batch_database=${path}: one gateway process per database file: run it as a ` +
      `StatefulSet of one replica, which never runs two pods of one identity (a ${kind}'s roll, or the ` +
      `replacement of a pod on a lost node, can start a second writer on the same file)`);
  }
  const replicas = w.obj.spec?.replicas ?? 1;
  if (replicas > 1) {
    report(w.obj, "spec.replicas", `${replicas}: --batch_database: one gateway process per database file; ` +
      `each replica would keep files and batches of its own, unknown (404) to the others: use replicas: 1`);
  }
  const found = mountOf(w, c, path);
  if (!found) {
    report(w.obj, at, `--batch_database=${path} is in no mounted volume of container ${c.name}: the root ` +
      `filesystem is read-only (readOnlyRootFilesystem) or lost with the pod: mount a persistent volume at its directory`);
    return;
  }
  const { mount } = found;
  if (mount.readOnly) {
    report(w.obj, at, `--batch_database=${path} is in volume ${mount.name}, mounted readOnly: SQLite writes the ` +
      `file and its -wal and -shm next to it`);
  }
  const templates = kind === "StatefulSet" ? (w.obj.spec.volumeClaimTemplates ?? []).map((t) => t.metadata?.name) : [];
  if (!templates.includes(mount.name) && !found.volume?.persistentVolumeClaim) {
    const what = Object.keys(found.volume ?? {}).find((k) => k !== "name") ?? "no volume of the pod";
    report(w.obj, at, `--batch_database=${path} is in volume ${mount.name} (${what}), not a PersistentVolumeClaim: ` +
      `every file and batch would be lost with the pod (mount a volumeClaimTemplate there)`);
  }
}

// The gateway's own token against the tokens file of each orchestrator it
// dials (`orchestrators`: [{o, oc}], the workloads and containers).
export function checkBatchToken({ w, c, ci, flags, orchestrators, secrets, flagsOf, secretFileAt, idOf, report }) {
  const at = `spec.template.spec.containers[${ci}].args`;
  const tokenPath = flags.get("batch_token_file");
  for (const { o, oc } of orchestrators) {
    const tokensPath = flagsOf(oc).get("tokens_file");
    if (!tokensPath) continue;
    if (!tokenPath) {
      report(w.obj, at, `--batch_token_file is missing: ${idOf(o.obj)} takes tokens (--tokens_file), so it would ` +
        `refuse every batch line (401): give the gateway a token that its tokens file gives role gateway`);
      return;
    }
    const token = secretFileAt(w, c, tokenPath, secrets);
    const tokens = secretFileAt(o, oc, tokensPath, secrets);
    if (!token || !tokens) continue; // not in the input (checkSecretFile reports what is missing)
    let file;
    try {
      file = parseYaml(String(tokens.data));
    } catch {
      continue; // not this check's to judge
    }
    if (!Array.isArray(file?.tokens)) continue;
    const mine = String(token.data).trim();
    const entry = file.tokens.find((e) => String(e?.token ?? "") === mine);
    const where = `--batch_token_file (Secret ${token.secret} key ${token.key})`;
    const theirs = `${idOf(o.obj)}'s tokens file (--tokens_file, Secret ${tokens.secret} key ${tokens.key})`;
    if (!entry) {
      report(w.obj, at, `${where}: the token is in no entry of ${theirs}: every batch line would be refused (401)`);
    } else if (entry.role !== "gateway") {
      report(w.obj, at, `${where}: the token is identity '${entry.identity}' with role ${entry.role} in ${theirs}: ` +
        `running a line as the batch's owner (on_behalf_of) needs role gateway`);
    }
  }
}

// A Service must not spread its clients over gateways with and without the
// store: /v1/files and /v1/batches would answer 404 from some of its pods.
export function checkBatchServices({ services, serviceTargets, flagsOf, idOf, report }) {
  for (const svc of services) {
    const gateways = (serviceTargets.get(svc) ?? []).map((w) => ({
      w, flags: w.containers.map(flagsOf).filter(isGatewayFlags),
    })).filter((g) => g.flags.length);
    const withStore = gateways.filter((g) => g.flags.some((f) => f.get("batch_database")));
    const without = gateways.filter((g) => !g.flags.some((f) => f.get("batch_database")));
    if (withStore.length && without.length) {
      report(svc, "spec.selector", `selects the pods of ${withStore.map((g) => idOf(g.w.obj)).join(", ")} (--batch_database) ` +
        `and of ${without.map((g) => idOf(g.w.obj)).join(", ")} (none): /v1/files and /v1/batches would answer 404 ` +
        `from some of its pods: give the batch gateway's pods labels of their own`);
    }
  }
}
