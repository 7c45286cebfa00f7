/**
 * The Kubernetes manifests under deploy/kubernetes, validated offline (no cluster: `kubectl apply
 * --dry-run=client` needs an API server for discovery and its OpenAPI document even then):
 *
 * 1. every document is checked against the Kubernetes API's own JSON schema for its apiVersion and
 *    kind, as compiled into `kubernetes-models` (types, required fields, enums, int-or-string,
 *    quantities); an unknown apiVersion or kind is an error, never skipped;
 * 2. no unknown field at any depth (a misspelt `readinesProbe` would otherwise be dropped by the
 *    schema check above, as the API's schemas allow unknown fields): every document is type-checked
 *    by the TypeScript compiler as an object literal of the kind's interface from the same
 *    `kubernetes-models` package, whose excess-property check names the field;
 * 3. what a schema cannot say, checked across documents: selectors and labels agree, Services
 *    reach a named container port, the engine's readiness is `/ready` on the engine's port, the
 *    key files come read-only from the Secret, each replica has its own data dir, the grace period
 *    leaves time for a checkpoint, and nothing secret is committed (the Secret example holds only
 *    placeholders the engine refuses, and it is not in the kustomization).
 *
 * A broken copy of each manifest (in a temporary directory) must fail, so the check is proven to
 * catch what it claims.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot, tempDir } from '@coffer/testkit';
import t from 'tap';
import ts from 'typescript';
import { parseAllDocuments } from 'yaml';

const DEPLOY = join(repoRoot(), 'deploy', 'kubernetes');
const MAIN = join(import.meta.dirname, '..', 'dist', 'main.js');

// biome-ignore lint/suspicious/noExplicitAny: manifests are untyped YAML until validated
type Doc = any;

interface Loaded {
  file: string;
  docs: Doc[];
  errors: string[];
}

/** Parses every YAML document of `file` (YAML errors are reported, not thrown). */
function load(file: string): Loaded {
  const errors: string[] = [];
  const docs: Doc[] = [];
  // YAML 1.1, as Kubernetes' own parser reads manifests (`0440` octal, `yes` a boolean).
  for (const d of parseAllDocuments(readFileSync(file, 'utf8'), { version: '1.1' })) {
    for (const e of d.errors) errors.push(`${file}: ${e.message}`);
    const v = d.toJS();
    if (v !== null && v !== undefined) docs.push(v);
  }
  return { file, docs, errors };
}

/** Checks one object against the schema of its apiVersion/kind; returns the errors. */
async function schemaErrors(doc: Doc, where: string): Promise<string[]> {
  if (typeof doc?.apiVersion !== 'string' || typeof doc?.kind !== 'string')
    return [`${where}: apiVersion and kind are required`];
  let mod: Record<string, unknown>;
  try {
    mod = await import(`kubernetes-models/${doc.apiVersion}`);
  } catch {
    return [`${where}: unknown apiVersion ${doc.apiVersion}`];
  }
  const Model = mod[doc.kind] as
    | ((new (d: unknown) => { validate(): void }) & { apiVersion?: string; kind?: string })
    | undefined;
  if (typeof Model !== 'function' || Model.kind !== doc.kind || Model.apiVersion !== doc.apiVersion)
    return [`${where}: unknown kind ${doc.kind} in ${doc.apiVersion}`];
  try {
    new Model(doc).validate();
    return [];
  } catch (e) {
    return [`${where} (${doc.kind} ${doc.metadata?.name}): ${(e as Error).message}`];
  }
}

/**
 * Type-checks every document as a literal of its kind's interface (step 2 of the module comment);
 * returns one message per unknown or mistyped field. Documents whose kind the schema check
 * already refused are left out.
 */
function unknownFieldErrors(docs: { where: string; doc: Doc }[]): string[] {
  const file = join(import.meta.dirname, '__deploy-manifests.ts');
  const imports: string[] = [];
  const values: string[] = [];
  for (const [i, { doc }] of docs.entries()) {
    imports.push(
      `import type { I${doc.kind} as T${i} } from 'kubernetes-models/${doc.apiVersion}/${doc.kind}';`,
    );
    values.push(`export const d${i}: T${i} = ${JSON.stringify(doc)};`);
  }
  const text = [...imports, ...values].join('\n');
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    skipLibCheck: true,
    types: [],
  };
  // The literal lives only in memory; the compiler resolves the package from this directory.
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile } = host;
  host.getSourceFile = (f, lang, ...rest) =>
    f === file ? ts.createSourceFile(f, text, lang) : getSourceFile.call(host, f, lang, ...rest);
  host.fileExists = (f) => f === file || fileExists.call(host, f);
  host.readFile = (f) => (f === file ? text : readFile.call(host, f));
  const program = ts.createProgram([file], options, host);
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const line = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line : -1;
    const where = docs[line - docs.length]?.where ?? docs[line]?.where ?? 'manifests';
    return `${where}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
  });
}

const MANIFEST = /\.ya?ml$/;
const isKustomization = (f: string) => /^kustomization\.ya?ml$/.test(f);

/** Validates every manifest in `dir` (step 1 of the module comment); returns all errors. */
async function validateDir(
  dir: string,
  { fields = false } = {},
): Promise<{ errors: string[]; docs: Map<string, Doc[]> }> {
  const errors: string[] = [];
  const docs = new Map<string, Doc[]>();
  const typed: { where: string; doc: Doc }[] = [];
  for (const f of readdirSync(dir).filter((f) => MANIFEST.test(f) && !isKustomization(f))) {
    const loaded = load(join(dir, f));
    errors.push(...loaded.errors);
    if (loaded.docs.length === 0) errors.push(`${f}: no document`);
    for (const [i, doc] of loaded.docs.entries()) {
      const where = `${f}#${i}`;
      const found = await schemaErrors(doc, where);
      errors.push(...found);
      if (found.length === 0) typed.push({ where: `${where} (${doc.kind} ${doc.metadata?.name})`, doc });
    }
    docs.set(f, loaded.docs);
  }
  // The compiler takes seconds: only where a test asks for it, once for the whole directory.
  if (fields && typed.length > 0) errors.push(...unknownFieldErrors(typed));
  return { errors, docs };
}

function all(docs: Map<string, Doc[]>): Doc[] {
  return [...docs.values()].flat();
}

function find(docs: Map<string, Doc[]>, kind: string, name: string): Doc {
  const d = all(docs).find((x) => x.kind === kind && x.metadata?.name === name);
  if (!d) throw new Error(`${kind} ${name} not found`);
  return d;
}

const matches = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.entries(selector).every(([k, v]) => labels?.[k] === v);

t.test('every manifest validates against the Kubernetes API schema of its kind', async (t) => {
  t.ok(existsSync(DEPLOY), 'deploy/kubernetes exists');
  const { errors, docs } = await validateDir(DEPLOY, { fields: true });
  t.same(errors, [], 'no schema error, no unknown field');
  const kinds = all(docs).map((d) => `${d.kind}/${d.metadata.name}`);
  for (const k of [
    'Deployment/coffer-engine',
    'Service/coffer-engine',
    'Deployment/coffer-console',
    'Service/coffer-console',
    'ConfigMap/coffer-engine',
    'Secret/coffer-engine',
    'Secret/coffer-engine-keys',
  ])
    t.ok(kinds.includes(k), `${k} present`);
});

t.test('a broken manifest fails the check (each broken copy is caught)', async (t) => {
  const breakages: [string, string, (text: string) => string][] = [
    ['replicas as text', 'engine.yaml', (s) => s.replace('replicas: 2', 'replicas: two')],
    [
      'a container port as text',
      'engine.yaml',
      (s) => s.replace('containerPort: 8787', 'containerPort: http'),
    ],
    [
      'a Deployment without its selector',
      'console.yaml',
      (s) =>
        s.replace(
          / {2}selector:\n {4}matchLabels:\n {6}app\.kubernetes\.io\/name: coffer-console\n {2}template:/,
          '  template:',
        ),
    ],
    [
      'a probe handler that is not an object',
      'engine.yaml',
      (s) => s.replace(/httpGet:\n {14}path: \/ready\n {14}port: http/, 'httpGet: /ready'),
    ],
    ['an unknown kind', 'configmap.yaml', (s) => s.replace('kind: ConfigMap', 'kind: ConfigMapp')],
    ['an unknown apiVersion', 'console.yaml', (s) => s.replace('apiVersion: apps/v1', 'apiVersion: apps/v9')],
    [
      'a Secret value that is not a string map',
      'secrets.example.yaml',
      (s) => s.replace('stringData:', 'stringData: 7\nx:'),
    ],
    ['invalid YAML', 'configmap.yaml', (s) => `${s}\n  : [unclosed\n`],
  ];
  for (const [what, file, brk] of breakages) {
    const dir = tempDir(t);
    cpSync(DEPLOY, dir, { recursive: true });
    const before = readFileSync(join(dir, file), 'utf8');
    const after = brk(before);
    t.not(after, before, `${what}: the breakage applies to ${file}`);
    writeFileSync(join(dir, file), after);
    const { errors } = await validateDir(dir);
    t.ok(errors.length > 0, `${what}: refused (${errors[0] ?? 'no error'})`);
  }
});

t.test('an unknown or misspelt field is caught at any depth', async (t) => {
  const dir = tempDir(t);
  cpSync(DEPLOY, dir, { recursive: true });
  const engine = readFileSync(join(dir, 'engine.yaml'), 'utf8');
  writeFileSync(join(dir, 'engine.yaml'), engine.replace('readinessProbe:', 'readinesProbe:'));
  const consoleFile = readFileSync(join(dir, 'console.yaml'), 'utf8');
  writeFileSync(
    join(dir, 'console.yaml'),
    consoleFile.replace('runAsNonRoot: true', 'runAsNonRoot: true\n        runAsNonroot: true'),
  );
  const plain = await validateDir(dir);
  t.same(plain.errors, [], 'the schema alone lets unknown fields through');
  const { errors } = await validateDir(dir, { fields: true });
  t.ok(
    errors.some((e) =>
      /^engine\.yaml#0 \(Deployment coffer-engine\):.*'"readinesProbe"' does not exist/.test(e),
    ),
    `the misspelt probe is named: ${errors.join('; ')}`,
  );
  t.ok(
    errors.some((e) =>
      /^console\.yaml#0 \(Deployment coffer-console\):.*'"runAsNonroot"' does not exist/.test(e),
    ),
    'an unknown field deep in the pod spec is named too',
  );
});

t.test('the kustomization lists every manifest but the Secret example, and the images', async (t) => {
  const k = load(join(DEPLOY, 'kustomization.yaml'));
  t.same(k.errors, []);
  const doc = k.docs[0];
  t.equal(doc.kind, 'Kustomization');
  const files = readdirSync(DEPLOY).filter((f) => MANIFEST.test(f) && !isKustomization(f));
  for (const r of doc.resources) t.ok(existsSync(join(DEPLOY, r)), `${r} exists`);
  t.same(
    [...doc.resources].sort(),
    files.filter((f) => f !== 'secrets.example.yaml').sort(),
    'every manifest is a resource, except the Secret example (it would overwrite the real Secrets)',
  );
  const { docs } = await validateDir(DEPLOY);
  const listed = doc.resources.flatMap((r: string) => docs.get(r) ?? []);
  t.notOk(
    listed.some((d: Doc) => d.kind === 'Secret'),
    'no Secret is applied by the kustomization',
  );
  const images = all(docs).flatMap((d) =>
    d.kind === 'Deployment'
      ? [...(d.spec.template.spec.initContainers ?? []), ...d.spec.template.spec.containers].map(
          (c: Doc) => c.image,
        )
      : [],
  );
  t.same(
    [...new Set(images)].sort(),
    doc.images.map((i: Doc) => i.name).sort(),
    'every image is set by name',
  );
});

t.test('selectors, Services and the console agree with the Deployments', async (t) => {
  const { docs } = await validateDir(DEPLOY);
  const deployments = all(docs).filter((d) => d.kind === 'Deployment');
  for (const d of deployments)
    t.ok(
      matches(d.spec.selector.matchLabels, d.spec.template.metadata.labels),
      `${d.metadata.name}: the selector selects its own pods`,
    );
  for (const s of all(docs).filter((d) => d.kind === 'Service')) {
    const target = deployments.find((d) => matches(s.spec.selector, d.spec.template.metadata.labels));
    t.ok(target, `Service ${s.metadata.name} selects a Deployment`);
    const ports = target.spec.template.spec.containers.flatMap((c: Doc) => c.ports ?? []);
    for (const p of s.spec.ports)
      t.ok(
        ports.some((cp: Doc) => cp.name === p.targetPort || cp.containerPort === p.targetPort),
        `Service ${s.metadata.name}: port ${p.port} reaches a container port`,
      );
  }
  for (const kind of ['PodDisruptionBudget', 'NetworkPolicy']) {
    const d = find(docs, kind, 'coffer-engine');
    const sel = kind === 'NetworkPolicy' ? d.spec.podSelector.matchLabels : d.spec.selector.matchLabels;
    t.ok(
      matches(sel, find(docs, 'Deployment', 'coffer-engine').spec.template.metadata.labels),
      `${kind} selects the engine`,
    );
  }
  const consoleEnv = Object.fromEntries(
    find(docs, 'Deployment', 'coffer-console').spec.template.spec.containers[0].env.map((e: Doc) => [
      e.name,
      e.value,
    ]),
  );
  const engineSvc = find(docs, 'Service', 'coffer-engine');
  t.equal(
    consoleEnv.CONSOLE_ENGINE_URL,
    `http://${engineSvc.metadata.name}:${engineSvc.spec.ports[0].port}`,
    'the console proxies the engine Service',
  );
  const netpol = find(docs, 'NetworkPolicy', 'coffer-engine');
  t.ok(
    matches(
      netpol.spec.ingress[0].from[0].podSelector.matchLabels,
      find(docs, 'Deployment', 'coffer-console').spec.template.metadata.labels,
    ),
    'only the console may reach the engine (what ENGINE_TRUST_PROXY relies on)',
  );
});

t.test(
  'engine replicas: readiness on /ready, shared keys read-only from the Secret, own data dir',
  async (t) => {
    const { docs } = await validateDir(DEPLOY);
    const dep = find(docs, 'Deployment', 'coffer-engine');
    const config = find(docs, 'ConfigMap', 'coffer-engine').data;
    const pod = dep.spec.template.spec;
    const engine = pod.containers.find((c: Doc) => c.name === 'engine');
    t.ok(dep.spec.replicas >= 2, 'several replicas');
    const http = engine.ports.find((p: Doc) => p.name === 'http');
    t.equal(String(http.containerPort), config.PORT, 'the container port is the engine PORT');
    t.equal(config.HOST, '0.0.0.0');
    for (const probe of ['readinessProbe', 'startupProbe', 'livenessProbe']) {
      t.equal(engine[probe].httpGet.path, '/ready', `${probe} on /ready`);
      t.equal(engine[probe].httpGet.port, 'http');
    }
    t.ok(
      pod.terminationGracePeriodSeconds >= 60,
      'SIGTERM leaves time for the runs to checkpoint and hand over',
    );

    t.same(
      engine.envFrom.map((e: Doc) => e.configMapRef?.name ?? e.secretRef?.name),
      ['coffer-engine', 'coffer-engine'],
      'settings from the ConfigMap, secrets from the Secret',
    );
    const env = Object.fromEntries(engine.env.map((e: Doc) => [e.name, e.value]));
    const mounts = new Map<string, Doc>(engine.volumeMounts.map((m: Doc) => [m.mountPath, m]));
    const volumes = new Map<string, Doc>(pod.volumes.map((v: Doc) => [v.name, v]));
    for (const v of [
      'ENGINE_SIGNER_KEY_FILE',
      'ENGINE_OPERATIONAL_KEY_FILE',
      'ENGINE_BREAK_GLASS_PUBLIC_KEY',
    ]) {
      const file: string = env[v];
      t.ok(file, `${v} set`);
      const dir = file.slice(0, file.lastIndexOf('/'));
      const mount = mounts.get(dir);
      t.equal(mount?.readOnly, true, `${v}: its directory is mounted read-only`);
      const volume = volumes.get(mount.name);
      t.equal(volume.emptyDir?.medium, 'Memory', `${v}: a memory-backed volume, never a disk`);
      const init = pod.initContainers.find((c: Doc) =>
        c.volumeMounts.some((m: Doc) => m.name === mount.name),
      );
      t.ok(init, `${v}: filled by an init container`);
      const script = init.command.join(' ');
      t.match(script, /install -m 0600/, 'copied with mode 0600');
      t.ok(
        script.includes(file.slice(dir.length + 1)) || script.includes('$f'),
        'the file is among those copied',
      );
      const secretMount = init.volumeMounts.find((m: Doc) => volumes.get(m.name)?.secret);
      t.equal(secretMount.readOnly, true, 'the Secret is mounted read-only');
      const secretVolume = volumes.get(secretMount.name).secret;
      t.equal(secretVolume.secretName, 'coffer-engine-keys');
      t.equal(secretVolume.defaultMode & 0o007, 0, 'the Secret files are never readable by others');
      t.match(
        init.command.join('\n'),
        new RegExp(`${secretMount.mountPath}/`),
        'copied from the Secret mount',
      );
    }
    const keyFiles = find(docs, 'Secret', 'coffer-engine-keys').stringData;
    t.same(Object.keys(keyFiles).sort(), ['break-glass.key.pub', 'operational.key', 'signer.key']);
    t.equal(
      pod.securityContext.fsGroup,
      pod.securityContext.runAsUser,
      'the group that may read the Secret is the engine user',
    );

    const dataMount = mounts.get(config.ENGINE_DATA_DIR);
    t.ok(dataMount, 'ENGINE_DATA_DIR is a mounted volume');
    t.ok(volumes.get(dataMount.name).emptyDir, 'each replica has its own data dir (never a shared claim)');
    t.notOk(mounts.get('/data')?.readOnly, 'the data dir is writable');
    t.equal(config.ENGINE_UPDATE_DEPLOYER, 'container', 'the orchestrator swaps images');
    t.match(config.ENGINE_DESTINATIONS, /^s3=s3:\/\//, 'a shared S3 destination');
    t.notMatch(
      config.ENGINE_DESTINATIONS,
      /[?&](accessKeyId|secretAccessKey|password)=/i,
      'no credential in the URL',
    );
  },
);

t.test('nothing secret is committed: placeholders only, and the engine refuses them', async (t) => {
  for (const f of readdirSync(DEPLOY)) {
    const text = readFileSync(join(DEPLOY, f), 'utf8');
    t.notMatch(text, /-----BEGIN/, `${f}: no key or certificate`);
  }
  const { docs } = await validateDir(DEPLOY);
  const secrets = all(docs).filter((d) => d.kind === 'Secret');
  t.ok(secrets.length >= 2);
  for (const s of secrets) {
    t.notOk(s.data, `${s.metadata.name}: no base64 data block`);
    for (const [k, v] of Object.entries(s.stringData as Record<string, string>))
      t.match(v, /CHANGE-ME/, `${s.metadata.name}.${k} is a placeholder`);
  }
  for (const d of all(docs).filter((x) => x.kind === 'ConfigMap'))
    for (const k of Object.keys(d.data))
      t.notMatch(k, /TOKEN|PASSWORD|SECRET|DATABASE_URL/, `ConfigMap key ${k} is not a secret`);

  // The placeholders stop the start (exit 2 naming the variable) rather than run with them.
  const env = find(docs, 'Secret', 'coffer-engine').stringData;
  const dir = tempDir(t);
  const start = (extra: Record<string, string>) =>
    spawnSync(process.execPath, [MAIN], {
      env: { PATH: process.env.PATH ?? '', ENGINE_DATA_DIR: join(dir, 'data'), PORT: '0', ...extra },
      encoding: 'utf8',
      timeout: 60_000,
    });
  const token = start({ ADMIN_TOKEN: env.ADMIN_TOKEN });
  t.equal(token.status, 2, 'the placeholder admin token is refused');
  t.match(token.stderr, /ADMIN_TOKEN: must be at least 16 characters/);
  writeFileSync(join(dir, 'signer.key'), find(docs, 'Secret', 'coffer-engine-keys').stringData['signer.key']);
  const key = start({ ENGINE_SIGNER_KEY_FILE: join(dir, 'signer.key') });
  t.equal(key.status, 2, 'the placeholder key file is refused');
  t.match(key.stderr, /ENGINE_SIGNER_KEY_FILE/);
});
