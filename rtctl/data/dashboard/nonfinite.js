// nonfinite.js -- rtctl's JSON carries no NaN/Infinity literal: a non-finite number is null in its place and
// the top-level object's "nonfinite" list says where (a JSON Pointer, RFC 6901) and which ("NaN", "Infinity",
// "-Infinity"). RtctlJson.parse reads such a text and puts the values back (rtctl.telemetry.jsonvalues).
"use strict";
(function (global) {
  function restore(obj) {
    const list = obj && obj.nonfinite;
    if (!Array.isArray(list)) return obj;
    delete obj.nonfinite;
    for (const entry of list) {
      const keys = String(entry.at).split("/").slice(1).map(k => k.replace(/~1/g, "/").replace(/~0/g, "~"));
      let node = obj;
      for (const k of keys.slice(0, -1)) node = node == null ? null : node[k];
      const last = keys[keys.length - 1];
      if (node != null && node[last] === null) node[last] = Number(entry.value);
    }
    return obj;
  }
  global.RtctlJson = { parse: text => restore(JSON.parse(text)), restore };
})(typeof window !== "undefined" ? window : globalThis);
