// Prometheus text (GET /metrics) parsed into samples, and sums over them.

import { api } from "./api.js";

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseMetrics(text) {
  const samples = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = LINE.exec(line);
    if (!m) continue;
    const labels = {};
    for (const [, name, value] of (m[2] || "").matchAll(LABEL)) labels[name] = value.replace(/\\(.)/g, "$1");
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return samples;
}

export async function fetchMetrics() {
  return parseMetrics(await api("/metrics", { asText: true }));
}

// Sum of `name` over every label set, or over those `keep(labels)` accepts.
export function total(samples, name, keep = () => true) {
  return samples.filter((s) => s.name === name && keep(s.labels)).reduce((acc, s) => acc + s.value, 0);
}

// `name` summed per value of one label: {labelValue: sum}.
export function byLabel(samples, name, label) {
  const out = {};
  for (const s of samples) {
    if (s.name !== name || s.labels[label] === undefined) continue;
    out[s.labels[label]] = (out[s.labels[label]] || 0) + s.value;
  }
  return out;
}
