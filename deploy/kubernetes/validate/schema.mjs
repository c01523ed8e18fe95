// Schema checks of one Kubernetes object, offline: the kind's JSON schema from
// kubernetes-models (wrong types, missing required fields, bad enum values)
// and the field lists of @kubernetes/client-node's generated models (unknown
// fields, which those schemas let through but the API server rejects or drops).
// Custom resources come from the kubernetes-models package of their group
// (CRD_PACKAGES): the schema of its kind, and its fields from the kind's
// TypeScript declaration there (crdfields.mjs), since those schemas carry no
// additionalProperties either.
// Part of validate.mjs; checkSchema() returns problems as {path, message}.

import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { typeOfDeclaration } from "./crdfields.mjs";

// API group of a custom resource -> the npm package of its models (pinned in
// package.json): KEDA's ScaledObject (keda.sh/v1alpha1), generated from the
// CRDs of KEDA 2.10.1.
const CRD_PACKAGES = { "keda.sh": "@kubernetes-models/keda" };
const require = createRequire(import.meta.url);

// client-node's generated models, one file each (dist/gen/models/<Name>.js,
// no imports of their own), loaded as needed: importing all of them
// (models/all.js) takes a second of every run.
const MODELS_DIR = join(dirname(require.resolve("@kubernetes/client-node/package.json")), "dist", "gen", "models");
const modelCache = new Map();
// The model class `name` (with attributeTypeMap), or null.
function clientModel(name) {
  if (!modelCache.has(name)) {
    const file = join(MODELS_DIR, `${name}.js`);
    modelCache.set(name, /^[A-Za-z0-9]+$/.test(name) && existsSync(file)
      ? import(pathToFileURL(file).href).then((m) => (m[name]?.attributeTypeMap ? m[name] : null))
      : Promise.resolve(null));
  }
  return modelCache.get(name);
}

// "apps/v1" -> {group: "apps", version: "v1"}; "v1" -> {group: "", version: "v1"}.
function splitApiVersion(apiVersion) {
  const slash = apiVersion.lastIndexOf("/");
  return slash < 0
    ? { group: "", version: apiVersion }
    : { group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1) };
}

// ajv's "/spec/containers/0/name" -> "spec.containers[0].name".
export function pointerToPath(pointer) {
  let path = "";
  for (const part of pointer.split("/").slice(1)) {
    const key = part.replace(/~1/g, "/").replace(/~0/g, "~");
    path += /^\d+$/.test(key) ? `[${key}]` : path === "" ? key : `.${key}`;
  }
  return path;
}

function joinPath(path, key) {
  return typeof key === "number" ? `${path}[${key}]` : path === "" ? key : `${path}.${key}`;
}

const schemaCache = new Map();

// The package of apiVersion's models: kubernetes-models, or a CRD package.
const packageOf = (apiVersion) => CRD_PACKAGES[splitApiVersion(apiVersion).group] ?? "kubernetes-models";

// The kubernetes-models class of apiVersion/kind, or null when it has none.
async function modelClass(apiVersion, kind) {
  const id = `${apiVersion}/${kind}`;
  if (!schemaCache.has(id)) {
    let cls = null;
    if (/^[a-z0-9.\-]*\/?v[0-9a-z]+$/.test(apiVersion) && /^[A-Za-z0-9]+$/.test(kind)) {
      try {
        cls = (await import(`${packageOf(apiVersion)}/${apiVersion}/${kind}`))[kind] ?? null;
      } catch {
        cls = null;
      }
    }
    schemaCache.set(id, cls);
  }
  return schemaCache.get(id);
}

const crdFieldCache = new Map();

// The field tree of a custom resource's kind (crdfields.mjs), or null.
function crdFields(apiVersion, kind) {
  const id = `${apiVersion}/${kind}`;
  if (!crdFieldCache.has(id)) {
    let tree = null;
    const pkg = CRD_PACKAGES[splitApiVersion(apiVersion).group];
    if (pkg) {
      try {
        tree = typeOfDeclaration(join(dirname(require.resolve(`${pkg}/package.json`)), apiVersion, `${kind}.d.ts`), kind);
      } catch {
        tree = null;
      }
    }
    crdFieldCache.set(id, tree);
  }
  return crdFieldCache.get(id);
}

// Reports every key that a CRD field tree does not define, recursively;
// metadata (IObjectMeta) is checked against client-node's V1ObjectMeta.
async function findUnknownCrdFields(value, tree, path, problems) {
  if (value === null || value === undefined || !tree) return;
  if (tree.ref) {
    if (tree.ref === "IObjectMeta") await findUnknownFields(value, "V1ObjectMeta", path, problems);
    return;
  }
  if (tree.array) {
    if (Array.isArray(value)) for (const [i, item] of value.entries()) await findUnknownCrdFields(item, tree.array, joinPath(path, i), problems);
    return;
  }
  if (typeof value !== "object" || Array.isArray(value)) return;
  if (tree.map) {
    for (const [key, item] of Object.entries(value)) await findUnknownCrdFields(item, tree.map, joinPath(path, key), problems);
    return;
  }
  if (!tree.object) return;
  for (const [key, item] of Object.entries(value)) {
    if (!tree.object.has(key)) {
      problems.push({ path: joinPath(path, key), message: "unknown field" });
    } else {
      await findUnknownCrdFields(item, tree.object.get(key), joinPath(path, key), problems);
    }
  }
}

// The client-node model (a class with attributeTypeMap) of apiVersion/kind.
async function fieldModel(apiVersion, kind) {
  const { group, version } = splitApiVersion(apiVersion);
  const v = version.charAt(0).toUpperCase() + version.slice(1);
  const groupPrefix = group
    .split(".")[0]
    .replace(/(^|-)([a-z])/g, (_, __, c) => c.toUpperCase());
  const coreOrGroup = group === "" ? "Core" : groupPrefix;
  for (const name of [`${v}${kind}`, `${coreOrGroup}${v}${kind}`]) {
    if (await clientModel(name)) return name;
  }
  return null;
}

// Reports every key that the model type `type` does not define, recursively.
// Values of the wrong shape are left to the JSON schema check.
async function findUnknownFields(value, type, path, problems) {
  if (value === null || value === undefined) return;
  const array = /^Array<(.+)>$/.exec(type);
  if (array) {
    if (Array.isArray(value)) for (const [i, item] of value.entries()) await findUnknownFields(item, array[1], joinPath(path, i), problems);
    return;
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) {
    if (typeof value === "object" && !Array.isArray(value)) {
      for (const [key, item] of Object.entries(value)) await findUnknownFields(item, map[1], joinPath(path, key), problems);
    }
    return;
  }
  const model = await clientModel(type);
  if (!model || typeof value !== "object" || Array.isArray(value)) return;
  const fields = new Map(model.attributeTypeMap.map((a) => [a.baseName, a.type]));
  for (const [key, item] of Object.entries(value)) {
    if (!fields.has(key)) {
      problems.push({ path: joinPath(path, key), message: "unknown field" });
    } else {
      await findUnknownFields(item, fields.get(key), joinPath(path, key), problems);
    }
  }
}

// One problem per ajv error, with the field path of the offending value.
function describeSchemaErrors(errors) {
  const seen = new Set();
  const problems = [];
  for (const e of errors) {
    let path = pointerToPath(e.instancePath);
    let message;
    if (e.keyword === "required") {
      path = joinPath(path, e.params.missingProperty);
      message = "required field missing";
    } else if (e.keyword === "type") {
      message = `wrong type: must be ${e.params.type}`;
    } else if (e.keyword === "enum") {
      message = `must be one of ${e.params.allowedValues.join(", ")}`;
    } else {
      message = e.message ?? e.keyword;
    }
    const line = `${path}: ${message}`;
    if (!seen.has(line)) {
      seen.add(line);
      problems.push({ path, message });
    }
  }
  return problems;
}

// All schema problems of one parsed object (an empty list when it is valid).
export async function checkSchema(obj) {
  const { apiVersion, kind } = obj;
  if (typeof apiVersion !== "string" || typeof kind !== "string") {
    return [{ path: "", message: "apiVersion and kind must both be set (strings)" }];
  }
  const problems = [];
  const cls = await modelClass(apiVersion, kind);
  if (!cls) {
    problems.push({ path: "", message: `no schema for ${apiVersion} ${kind} (unknown kind or apiVersion)` });
  } else {
    try {
      new cls(obj).validate();
    } catch (err) {
      if (!Array.isArray(err.errors)) throw err;
      problems.push(...describeSchemaErrors(err.errors));
    }
  }
  const crd = CRD_PACKAGES[splitApiVersion(apiVersion).group];
  const model = crd ? null : await fieldModel(apiVersion, kind);
  if (crd) {
    const tree = crdFields(apiVersion, kind);
    if (tree) await findUnknownCrdFields(obj, tree, "", problems);
    else if (cls) problems.push({ path: "", message: `no field list for ${apiVersion} ${kind} in ${crd}: unknown fields not checked` });
  } else if (!model) {
    if (cls) problems.push({ path: "", message: `no field list for ${apiVersion} ${kind}: unknown fields not checked` });
  } else {
    await findUnknownFields(obj, model, "", problems);
  }
  return problems;
}
