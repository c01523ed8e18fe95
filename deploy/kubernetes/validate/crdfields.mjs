// Field lists of a custom resource (e.g. KEDA's ScaledObject), for the
// unknown-field check of schema.mjs. The CRD model packages of
// kubernetes-models (@kubernetes-models/keda) compile their JSON schema
// without additionalProperties, so their validate() lets unknown fields
// through; the fields are read instead from the package's TypeScript
// declaration of the kind (keda.sh/v1alpha1/ScaledObject.d.ts, generated from
// the same CRD), an interface of nested object literals:
//   "spec": { "minReplicaCount"?: number; "triggers": Array<{ ... }>; ... };
// typeOfDeclaration() turns it into a tree of
//   {object: Map(field -> type)} | {array: type} | {map: type} | {ref: "IObjectMeta"} | {leaf: true}.

import { readFileSync } from "node:fs";

// Strings, punctuation and words of a declaration, comments left out.
function tokenize(text) {
  const tokens = [];
  const re = /\/\*[\s\S]*?\*\/|\/\/[^\n]*|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[A-Za-z_$][\w$.]*|\d+|\S/g;
  for (const [t] of text.matchAll(re)) {
    if (!t.startsWith("/*") && !t.startsWith("//")) tokens.push(t);
  }
  return tokens;
}

function parser(tokens) {
  let i = 0;
  const peek = () => tokens[i];
  const next = () => tokens[i++];
  const expect = (t) => {
    if (tokens[i] !== t) throw new Error(`expected ${t} at token ${i}, found ${tokens[i]}`);
    i++;
  };
  // TYPE: a union of terms; only the first term's shape is kept (the
  // generated declarations use unions for literal enums only).
  function type() {
    const t = term();
    while (peek() === "|") {
      next();
      term();
    }
    return t;
  }
  function term() {
    let t;
    const tok = next();
    if (tok === "{") {
      t = members();
    } else if (tok === "Array" && peek() === "<") {
      next();
      t = { array: type() };
      expect(">");
    } else if (/^I[A-Z]/.test(tok)) {
      t = { ref: tok };
    } else {
      t = { leaf: true }; // string, number, boolean, a literal, ...
    }
    while (peek() === "[" && tokens[i + 1] === "]") {
      i += 2;
      t = { array: t };
    }
    return t;
  }
  // After "{": fields up to "}"; an index signature makes it a map.
  function members() {
    const fields = new Map();
    let map = null;
    while (peek() !== "}") {
      if (peek() === "[") {
        while (next() !== "]");
        expect(":");
        map = type();
      } else {
        const name = next().replace(/^["']|["']$/g, "");
        if (peek() === "?") next();
        expect(":");
        fields.set(name, type());
      }
      if (peek() === ";" || peek() === ",") next();
    }
    expect("}");
    return map && !fields.size ? { map } : { object: fields };
  }
  return { type, peek, next, expect, at: () => i, seek: (j) => (i = j) };
}

// The field tree of `interface I<Kind> { ... }` in a .d.ts file, or null.
export function typeOfDeclaration(file, kind) {
  const tokens = tokenize(readFileSync(file, "utf8"));
  for (let j = 0; j + 2 < tokens.length; j++) {
    if (tokens[j] === "interface" && tokens[j + 1] === `I${kind}` && tokens[j + 2] === "{") {
      const p = parser(tokens);
      p.seek(j + 2);
      return p.type();
    }
  }
  return null;
}
