#!/usr/bin/env node
// Prints rendered manifests (a file, or stdin) in a canonical form, so that
// the output of two kustomize versions can be compared with diff: objects
// sorted by kind/namespace/name, keys sorted, and the content-hash suffix of
// generated ConfigMaps (kustomize v2 and v5 hash differently) replaced by
// "<hash>" wherever the name occurs. Used by ../manifests_test.sh.

import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const text = readFileSync(process.argv[2] && process.argv[2] !== "-" ? process.argv[2] : 0, "utf8");
const objects = parseAllDocuments(text).map((d) => d.toJS()).filter((o) => o && typeof o === "object");

const renames = new Map();
for (const o of objects) {
  const name = o.metadata?.name ?? "";
  if (o.kind === "ConfigMap" && /-[a-z0-9]{10}$/.test(name)) renames.set(name, name.slice(0, -10) + "<hash>");
}

function canonical(value) {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.keys(value).sort().map((k) => [k, canonical(value[k])]));
  }
  return typeof value === "string" && renames.has(value) ? renames.get(value) : value;
}

const key = (o) => `${o.kind}/${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}`;
const sorted = objects.map(canonical).sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
for (const o of sorted) console.log(JSON.stringify(o));
