// An MCP host that is not kubeskills's own: the official TypeScript SDK
// (@modelcontextprotocol/sdk, pinned in package.json) drives an agent's
// /mcp endpoint and prints, as one JSON object, what it saw. The e2e
// (mcpClientDrivesTheAgent in test/e2e/mcp_test.go) runs it and judges the
// output.
//
//   MCP_TOKEN=... node client.mjs URL [COMMAND]
//   node client.mjs --stdio [COMMAND] -- PROGRAM [ARG...]
//
// The first form speaks streamable HTTP: URL is the agent's MCP endpoint
// (http://HOST:PORT/mcp) and MCP_TOKEN its bearer token (from the
// environment, so it is not on the process list). The second speaks stdio,
// as hosts that start their servers as commands do: it starts PROGRAM with
// ARGs (kubectl-skills mcp --agent NAME ...), writes to its stdin and reads
// its stdout; its stderr goes to this one's. When the session is over it
// closes PROGRAM's stdin, and reports how PROGRAM ended (bridge).
//
// The client initializes, declares the Skills extension
// (io.modelcontextprotocol/skills), pages through skills/list, gets the
// first skill with skills/get, reads every listed file with resources/read
// and checks its SHA-256 and size against the entry, lists the tools, then
// calls run_command with COMMAND (default: kubectl get pods -o name) and,
// while the run is Pending or Running, polls command_status. A protocol
// error exits 1 with the error on stderr; a file that does not match its
// entry is reported (verified: false), for the caller to judge.
import { createHash } from "node:crypto";
import { isDeepStrictEqual } from "node:util";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { z } from "zod";

const EXTENSION = "io.modelcontextprotocol/skills";
// At most this many files are read, over all skills.
const MAX_READS = 64;
// How long a command may take, polls included.
const RUN_TIMEOUT_MS = 180_000;
const DEFAULT_COMMAND = "kubectl get pods -o name";
const USAGE = `usage: MCP_TOKEN=TOKEN node client.mjs URL [COMMAND]
       node client.mjs --stdio [COMMAND] -- PROGRAM [ARG...]`;

// The shapes of the Skills extension (SEP-2640), as permissive as the
// specification lets a host be: unknown keys pass through.
const SkillResource = z.looseObject({
  uri: z.string(),
  digest: z.string(),
  size: z.number(),
});
const Skill = z.looseObject({
  uri: z.string(),
  frontmatter: z.looseObject({ name: z.string(), description: z.string() }),
  resources: z.union([z.array(SkillResource), z.literal("dynamic")]),
});
const ListSkillsResult = z.looseObject({
  skills: z.array(Skill),
  nextCursor: z.string().optional(),
});
const GetSkillResult = z.looseObject({ skill: Skill });

async function main() {
  const args = process.argv.slice(2);
  const client = new Client(
    { name: "kubeskills-e2e", version: "1.0.0" },
    { capabilities: { extensions: { [EXTENSION]: {} } } },
  );
  if (args[0] === "--stdio") {
    return stdio(client, args.slice(1));
  }
  const [url, command = DEFAULT_COMMAND] = args;
  const token = process.env.MCP_TOKEN;
  if (!url || !token || url.startsWith("-")) {
    throw new Error(USAGE);
  }
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  try {
    return await session(client, () => transport.protocolVersion, command);
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
}

// stdio runs the session with a server the client starts: args are
// [COMMAND] -- PROGRAM [ARG...].
async function stdio(client, args) {
  const dash = args.indexOf("--");
  if (dash < 0 || dash > 1 || dash === args.length - 1) {
    throw new Error(USAGE);
  }
  const command = dash === 1 ? args[0] : DEFAULT_COMMAND;
  const [program, ...programArgs] = args.slice(dash + 1);
  // The server gets the SDK's default environment (HOME, PATH, USER...),
  // as hosts give theirs: what it needs must be on its command line.
  const transport = new StdioClientTransport({ command: program, args: programArgs, stderr: "inherit" });
  // The stdio transport has no protocol version of its own; the client
  // hands the negotiated one to a transport that takes it.
  let protocolVersion = null;
  transport.setProtocolVersion = (version) => {
    protocolVersion = version;
  };
  await client.connect(transport);
  // How the server ends, once the session closes its stdin. The transport
  // keeps the child process to itself (_process), and forgets it when it
  // exits.
  const ended = new Promise((resolve) => {
    const child = transport._process;
    if (child === undefined) {
      resolve({ exitCode: null, signal: null, error: "the server exited before the session began" });
      return;
    }
    child.once("exit", (exitCode, signal) => resolve({ exitCode, signal }));
  });
  let seen;
  try {
    seen = await session(client, () => protocolVersion, command);
  } finally {
    await client.close();
  }
  seen.bridge = await ended;
  return seen;
}

async function session(client, protocolVersion, command) {
  const capabilities = client.getServerCapabilities() ?? {};
  const seen = {
    protocolVersion: protocolVersion() ?? null,
    server: client.getServerVersion() ?? null,
    skillsExtension: capabilities.extensions?.[EXTENSION] ?? null,
    resourcesCapability: capabilities.resources !== undefined,
    pages: 0,
    skills: [],
    get: null,
    reads: [],
    tools: [],
    run: null,
  };

  let cursor;
  do {
    const page = await client.request(
      { method: "skills/list", params: cursor === undefined ? {} : { cursor } },
      ListSkillsResult,
    );
    seen.pages++;
    seen.skills.push(...page.skills);
    cursor = page.nextCursor;
  } while (cursor);

  if (seen.skills.length > 0) {
    const listed = seen.skills[0];
    const { skill } = await client.request(
      { method: "skills/get", params: { uri: listed.uri } },
      GetSkillResult,
    );
    seen.get = { uri: listed.uri, skill, matchesList: isDeepStrictEqual(skill, listed) };
  }

  for (const skill of seen.skills) {
    if (!Array.isArray(skill.resources)) {
      continue;
    }
    for (const entry of skill.resources) {
      if (seen.reads.length === MAX_READS) {
        break;
      }
      seen.reads.push(await read(client, skill, entry));
    }
  }

  const { tools } = await client.listTools();
  seen.tools = tools.map((t) => ({ name: t.name, annotations: t.annotations ?? null }));

  seen.run = await run(client, command);
  return seen;
}

// read reads one listed file and checks its bytes against the entry.
async function read(client, skill, entry) {
  const { contents } = await client.readResource({ uri: entry.uri });
  const content = contents.find((c) => c.uri === entry.uri) ?? contents[0];
  if (content === undefined) {
    throw new Error(`resources/read of ${entry.uri} returned no contents`);
  }
  let bytes;
  let kind;
  if (typeof content.text === "string") {
    bytes = Buffer.from(content.text, "utf8");
    kind = "text";
  } else if (typeof content.blob === "string") {
    bytes = Buffer.from(content.blob, "base64");
    kind = "blob";
  } else {
    throw new Error(`resources/read of ${entry.uri} returned neither text nor blob`);
  }
  const digest = "sha256:" + createHash("sha256").update(bytes).digest("hex");
  return {
    skill: skill.uri,
    uri: entry.uri,
    kind,
    mimeType: content.mimeType ?? null,
    size: bytes.length,
    digest,
    listedSize: entry.size,
    listedDigest: entry.digest,
    verified: bytes.length === entry.size && digest === entry.digest,
  };
}

// run calls run_command and polls command_status while the run is under
// way. It returns the first and the last result.
async function run(client, command) {
  const deadline = Date.now() + RUN_TIMEOUT_MS;
  const options = () => ({ timeout: Math.max(1, deadline - Date.now()), resetTimeoutOnProgress: true });
  const first = result(
    await client.callTool({ name: "run_command", arguments: { command } }, undefined, options()),
  );
  let last = first;
  let polls = 0;
  while (["Pending", "Running"].includes(last.structuredContent?.phase)) {
    if (Date.now() > deadline) {
      throw new Error(`the run ${last.structuredContent.run} is still ${last.structuredContent.phase}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
    polls++;
    last = result(
      await client.callTool(
        { name: "command_status", arguments: { run: last.structuredContent.run } },
        undefined,
        options(),
      ),
    );
  }
  return { command, first, last, polls };
}

// result keeps what a tool call returned that the caller judges: the
// structured result, and whether its text content is the same JSON.
function result(res) {
  const text = res.content?.find((c) => c.type === "text")?.text;
  let textMatches = false;
  try {
    textMatches = text !== undefined && isDeepStrictEqual(JSON.parse(text), res.structuredContent);
  } catch {
    textMatches = false;
  }
  return { isError: res.isError === true, structuredContent: res.structuredContent ?? null, textMatches };
}

main().then(
  (seen) => {
    process.stdout.write(JSON.stringify(seen, null, 2) + "\n");
  },
  (err) => {
    process.stderr.write(`mcp client: ${err?.stack ?? err}\n`);
    process.exit(1);
  },
);
