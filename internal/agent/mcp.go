package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kubeskills/kubeskills/internal/catalog"
	"github.com/kubeskills/kubeskills/internal/mcpskills"
	"github.com/kubeskills/kubeskills/internal/skill"
)

// MCP serves the agent over the Model Context Protocol at /mcp, on the
// listener of /v1 and behind the same token: its catalog through the
// Skills extension (skills/list, skills/get, each file a skill:// resource
// read with resources/read), and its commands through the tools
// run_command and command_status, which file CommandRuns of this Agent
// exactly as /v1 does.
const (
	// mcpPath is where the endpoint is served.
	mcpPath = "/mcp"
	// mcpCallWait bounds how long one tool call waits for a command. MCP
	// clients commonly give up on a request after 60 s (the TypeScript
	// SDK's default), so a longer command answers "still Running" and the
	// client calls command_status.
	mcpCallWait = 45 * time.Second
	// mcpBodyBytes bounds one POST to /mcp.
	mcpBodyBytes = 1 << 20
	// mcpTTL is the freshness hint of skill listings and reads: a change
	// reaches open sessions as a notification, so hosts may cache a while.
	mcpTTL = 60 * time.Second
	// metaInvocation and metaContentHash are the keys of what the server
	// adds to a skill's entry and to its SKILL.md resource, under the
	// project's own prefix, as the extension asks.
	metaInvocation  = "kubeskills.io/invocation"
	metaContentHash = "kubeskills.io/contentHash"
	// skillFileTemplate reaches every file of every skill; resources/list
	// lists only each skill's SKILL.md.
	skillFileTemplate      = mcpskills.Scheme + "://{skill}/{+path}"
	mcpServerInstructions  = "This server is the kubeskills agent %s. Its skills are listed by skills/list (the MCP Skills extension) and read as skill://NAME/PATH resources. Commands run only through run_command, which files a CommandRun judged by the cluster's CommandPolicy: some run at once, some wait for a person's approval (poll command_status), some are denied."
	toolRunCommandDesc     = "Run a shell command in a sandboxed Kubernetes Job of this agent. The cluster's CommandPolicy decides whether it runs; a command that needs a person's approval answers at once with phase AwaitingApproval, the run's name and the approve command: poll command_status with that name; one queued behind the agent's bound on commands running at once answers with phase Pending and its place in line, and starts in its turn. The result has phase, exitCode, stdout, stderr and the policy's decision."
	toolCommandStatusDesc  = "Wait for a command started earlier (for example one awaiting approval) and return its result as run_command does."
	mcpSessionsFullMessage = "the agent serves %d MCP sessions, its limit; close one or retry after idle sessions expire"
	mcpSessionBusyMessage  = "this MCP session has %d requests in flight, its limit; retry once one of them ends"
	// mcpSessionHeader names the session a request belongs to.
	mcpSessionHeader = "Mcp-Session-Id"
)

// mcpEndpoint is the MCP side of a runtime.
type mcpEndpoint struct {
	r       *Runtime
	server  *mcp.Server
	handler http.Handler
	max     int

	// inflight counts the requests each session has in flight, by session
	// id, up to perSession; a session with none has no entry.
	inflightMu sync.Mutex
	inflight   map[string]int
	perSession int

	// mu guards the published skills; sync holds it while it publishes.
	mu sync.Mutex
	// served is the catalog the published skills were built from: the
	// store swaps in a new *Catalog on each reload and never changes one it
	// handed out, so the pointer names one snapshot, entries and revision
	// alike.
	served    *catalog.Catalog
	complete  bool
	published map[string]*publishedSkill
}

// publishedSkill is a skill as served over MCP: its entry, built from the
// bytes served, for the catalog entry it was built from.
type publishedSkill struct {
	hash       string
	invocation string
	entry      mcpskills.Skill
	resource   *mcp.Resource
}

// runCommandArgs are run_command's arguments.
type runCommandArgs struct {
	Command string `json:"command" jsonschema:"The shell command line."`
	Skill   string `json:"skill,omitempty" jsonschema:"The skill the command serves, if any: its files are mounted for the command and its allowed-tools narrow the policy."`
}

// commandStatusArgs are command_status's arguments.
type commandStatusArgs struct {
	Run string `json:"run" jsonschema:"The run's name, as run_command returned it."`
}

func newMCPEndpoint(r *Runtime) (*mcpEndpoint, error) {
	m := &mcpEndpoint{r: r, max: r.cfg.Server.MCPMaxSessions, published: map[string]*publishedSkill{},
		inflight: map[string]int{}, perSession: r.cfg.Server.MCPMaxSessionRequests}
	caps := &mcp.ServerCapabilities{
		Resources: &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
		Tools:     &mcp.ToolCapabilities{},
	}
	caps.AddExtension(mcpskills.ExtensionID, map[string]any{})
	m.server = mcp.NewServer(&mcp.Implementation{Name: "kubeskills-agent-" + r.cfg.Agent, Title: "kubeskills agent " + r.cfg.Agent, Version: "v1alpha1"},
		&mcp.ServerOptions{
			Instructions:       fmt.Sprintf(mcpServerInstructions, r.cfg.Agent),
			Logger:             sdkLogger(r.log),
			Capabilities:       caps,
			SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
			UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
			SetCacheable: func(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
				if _, ok := req.(*mcp.ReadResourceRequest); ok {
					c.TTLMs = int(mcpTTL / time.Millisecond)
				}
			},
		})
	m.server.AddReceivingMiddleware(mcpSpans)
	m.server.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: skillFileTemplate, Name: "skill-file",
		Description: "A file of a skill: SKILL.md or one it bundles, at the path its skills/list entry lists.",
	}, m.readResource)
	mcp.AddTool(m.server, &mcp.Tool{
		Name: ToolRunCommand, Title: "Run a command", Description: toolRunCommandDesc,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: ptr.To(true), OpenWorldHint: ptr.To(true)},
	}, m.runCommand)
	mcp.AddTool(m.server, &mcp.Tool{
		Name: ToolCommandStatus, Title: "Command status", Description: toolCommandStatusDesc,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr.To(false)},
	}, m.commandStatus)
	if err := mcp.AddReceivingCustomMethod(m.server, mcpskills.MethodList, m.listSkills); err != nil {
		return nil, err
	}
	if err := mcp.AddReceivingCustomMethod(m.server, mcpskills.MethodGet, m.getSkill); err != nil {
		return nil, err
	}
	m.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return m.server }, &mcp.StreamableHTTPOptions{
		SessionTimeout:      r.cfg.Server.MCPSessionIdle,
		MaxRequestBodyBytes: mcpBodyBytes,
		Logger:              sdkLogger(r.log),
	})
	return m, nil
}

// sdkLogger hands the SDK the runtime's logger one level down: the SDK logs
// each notification and subscription at info.
func sdkLogger(log logr.Logger) *slog.Logger {
	return slog.New(logr.ToSlogHandler(log.WithName("mcp").V(1)))
}

// ServeHTTP serves /mcp: at most max sessions at once (a new one past that
// is answered 503), at most perSession requests of one session in flight
// (the next is answered 429, so that one session cannot hold every slot of
// /mcp), the body read within the server's read timeout, and the answer
// allowed the time its call may take: a tool call up to mcpCallWait, a
// stream of notifications until its session ends.
func (m *mcpEndpoint) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	session := req.Header.Get(mcpSessionHeader)
	if req.Method == http.MethodPost && session == "" && m.sessions() >= m.max {
		w.Header().Set("Retry-After", "10")
		writeError(w, http.StatusServiceUnavailable, "unavailable", fmt.Sprintf(mcpSessionsFullMessage, m.max))
		return
	}
	// A session's GET stream is one at most (the SDK answers a second
	// 409), and a DELETE ends the session: neither waits for a place.
	if session != "" && req.Method == http.MethodPost {
		release, ok := m.admit(session)
		if !ok {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusTooManyRequests, map[string]apiError{"error": {
				Message: fmt.Sprintf(mcpSessionBusyMessage, m.perSession), Type: "rate_limit_error", Code: "rate_limit_exceeded",
			}})
			return
		}
		defer release()
	}
	rc := http.NewResponseController(w)
	if req.Method == http.MethodGet || listens(req) {
		_ = rc.SetWriteDeadline(time.Time{})
	} else {
		m.r.extendWrite(w, mcpCallWait)
	}
	m.sync(req.Context())
	m.handler.ServeHTTP(w, req)
}

// listens tells whether a POST opens a notification stream
// (subscriptions/listen), which lives as long as the client keeps it.
func listens(req *http.Request) bool {
	if req.Method != http.MethodPost || req.Body == nil {
		return false
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(req.Body); err != nil {
		return false
	}
	req.Body = readCloser{bytes.NewReader(buf.Bytes())}
	var msg struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(buf.Bytes(), &msg) == nil && msg.Method == "subscriptions/listen"
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// admit takes a place for a request of session, or tells that the session
// has perSession requests in flight already.
func (m *mcpEndpoint) admit(session string) (release func(), ok bool) {
	m.inflightMu.Lock()
	defer m.inflightMu.Unlock()
	if m.inflight[session] >= m.perSession {
		return nil, false
	}
	m.inflight[session]++
	return func() {
		m.inflightMu.Lock()
		defer m.inflightMu.Unlock()
		if m.inflight[session]--; m.inflight[session] <= 0 {
			delete(m.inflight, session)
		}
	}, true
}

// sessions counts the sessions open now.
func (m *mcpEndpoint) sessions() int {
	n := 0
	for range m.server.Sessions() {
		n++
	}
	return n
}

// FollowCatalog publishes catalog changes to the MCP sessions open, every
// interval, until ctx ends: skills added or removed change the resource
// list (notifications/resources/list_changed), and the files of a skill
// that changed are reported updated to the sessions subscribed to them.
func (r *Runtime) FollowCatalog(ctx context.Context, every time.Duration) {
	if r.mcp == nil {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		r.mcp.sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sync publishes the catalog being served, when it changed since the last
// time or when a skill could not be read then. A skill whose files cannot
// be read now (its shards are not mounted yet, or they are mid-update) is
// left out until they can.
//
// What changed is judged from the one catalog read here, never from a
// revision read apart from it: a reload landing between two reads would
// pair the old entries with the new revision, and the list would stay
// stale until the catalog changed again.
func (m *mcpEndpoint) sync(ctx context.Context) {
	c := m.r.skills.Catalog()
	if c == nil {
		return
	}
	m.mu.Lock()
	if c == m.served && m.complete {
		m.mu.Unlock()
		return
	}
	next := make(map[string]*publishedSkill, len(c.Skills))
	complete := true
	for i := range c.Skills {
		e := &c.Skills[i]
		if p := m.published[e.Name]; p != nil && p.hash == e.ContentHash && p.invocation == e.Invocation {
			next[e.Name] = p
			continue
		}
		p, err := m.publish(e)
		if err != nil {
			complete = false
			ctrl.LoggerFrom(ctx).V(1).Info("A skill is not served over MCP yet", "skill", e.Name, "reason", err.Error())
			continue
		}
		next[e.Name] = p
	}
	var gone, updated []string
	for name, p := range m.published {
		if n := next[name]; n != p {
			gone = append(gone, p.entry.URI)
			updated = append(updated, resourceURIs(p)...)
		}
	}
	if len(gone) > 0 {
		m.server.RemoveResources(gone...)
	}
	for name, p := range next {
		if m.published[name] != p {
			updated = append(updated, resourceURIs(p)...)
			m.server.AddResource(p.resource, m.readResource)
		}
	}
	m.published, m.served, m.complete = next, c, complete
	m.mu.Unlock()
	slices.Sort(updated)
	for _, uri := range slices.Compact(updated) {
		_ = m.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
	}
}

func resourceURIs(p *publishedSkill) []string {
	uris := []string{p.entry.URI}
	for _, f := range p.entry.Resources.Files {
		uris = append(uris, f.URI)
	}
	return uris
}

// publish builds a skill's entry from the bytes the runtime serves: its
// SKILL.md's front matter, verbatim, and the digest and size of every file.
// A skill served from an image with more files than are listed is
// "dynamic": its files cannot all be hashed up front.
func (m *mcpEndpoint) publish(e *catalog.Entry) (*publishedSkill, error) {
	loaded, err := m.r.skills.Use(e.Name, true)
	if err != nil {
		return nil, err
	}
	md, err := m.r.skills.ReadFile(e.Name, skill.SkillFileName, 0)
	if err != nil {
		return nil, err
	}
	fm, err := mcpskills.Frontmatter(md)
	if err != nil {
		return nil, fmt.Errorf("failed to read the front matter of skill %s: %w", e.Name, err)
	}
	entry := mcpskills.Skill{
		URI: mcpskills.SkillURI(e.Name), Frontmatter: fm,
		Meta: map[string]any{metaInvocation: e.Invocation, metaContentHash: e.ContentHash},
	}
	if loaded.FilesTruncated {
		entry.Resources = mcpskills.Resources{Dynamic: true}
	} else {
		files := []mcpskills.SkillResource{mcpskills.FileResource(e.Name, skill.SkillFileName, md)}
		for _, p := range loaded.Files {
			data, err := m.r.skills.ReadFile(e.Name, p, 0)
			if err != nil {
				return nil, err
			}
			files = append(files, mcpskills.FileResource(e.Name, p, data))
		}
		entry.Resources = mcpskills.Resources{Files: files}
	}
	return &publishedSkill{
		hash: e.ContentHash, invocation: e.Invocation, entry: entry,
		resource: &mcp.Resource{
			URI: entry.URI, Name: e.Name, Description: e.Description, MIMEType: "text/markdown", Size: int64(len(md)),
			Meta: mcp.Meta{metaInvocation: e.Invocation},
		},
	}, nil
}

// listSkills answers skills/list: the Agent's catalog, every entry whole,
// in name order.
func (m *mcpEndpoint) listSkills(ctx context.Context, _ *mcp.ServerSession, p *mcpskills.ListParams) (*mcpskills.ListResult, error) {
	if p != nil && p.Cursor != "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "this server answers skills/list in one page: there is no cursor to follow"}
	}
	m.sync(ctx)
	m.mu.Lock()
	skills := make([]mcpskills.Skill, 0, len(m.published))
	for _, p := range m.published {
		skills = append(skills, p.entry)
	}
	m.mu.Unlock()
	slices.SortFunc(skills, func(a, b mcpskills.Skill) int { return strings.Compare(a.URI, b.URI) })
	return &mcpskills.ListResult{ResultType: mcpskills.ResultComplete, Skills: skills, Cacheable: cacheable()}, nil
}

func cacheable() mcp.Cacheable {
	return mcp.Cacheable{TTLMs: int(mcpTTL / time.Millisecond), CacheScope: "private"}
}

// getSkill answers skills/get for the URI of a served skill's SKILL.md.
func (m *mcpEndpoint) getSkill(ctx context.Context, _ *mcp.ServerSession, p *mcpskills.GetParams) (*mcpskills.GetResult, error) {
	if p == nil || p.URI == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "skills/get needs the uri of a skill's SKILL.md"}
	}
	name, file, err := mcpskills.ParseURI(p.URI)
	if err != nil || file != skill.SkillFileName {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s is not the URI of a skill's SKILL.md (skill://NAME/SKILL.md)", p.URI)}
	}
	m.sync(ctx)
	m.mu.Lock()
	pub := m.published[name]
	m.mu.Unlock()
	if pub == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "No skill is served at " + p.URI}
	}
	return &mcpskills.GetResult{ResultType: mcpskills.ResultComplete, Skill: pub.entry, Cacheable: cacheable()}, nil
}

// readResource serves a skill's file by its skill:// URI: the bytes the
// skill's entry hashed, as text when they are UTF-8 text and as a blob
// otherwise.
func (m *mcpEndpoint) readResource(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	name, file, err := mcpskills.ParseURI(uri)
	if err != nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	data, err := m.r.skills.ReadFile(name, file, 0)
	switch {
	case errors.Is(err, catalog.ErrNotFound), errors.Is(err, catalog.ErrFileNotFound), errors.Is(err, catalog.ErrInvalidPath):
		return nil, mcp.ResourceNotFoundError(uri)
	case err != nil:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the skill cannot be read now; try again shortly: " + err.Error()}
	}
	contents := &mcp.ResourceContents{URI: uri, MIMEType: mimeType(file, data)}
	if isText(contents.MIMEType, data) {
		contents.Text = string(data)
	} else {
		contents.Blob = data
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{contents}}, nil
}

// mimeType names a file's type by its extension, Markdown for .md, and
// text or bytes by its content otherwise.
func mimeType(file string, data []byte) string {
	ext := strings.ToLower(path.Ext(file))
	if ext == ".md" || ext == ".markdown" {
		return "text/markdown"
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	if utf8.Valid(data) && !bytes.ContainsRune(data, 0) {
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}

// isText tells whether a file goes out as text: a text type, or JSON, YAML
// or a script, and valid UTF-8 without NUL bytes.
func isText(mimeType string, data []byte) bool {
	textual := strings.HasPrefix(mimeType, "text/") || strings.Contains(mimeType, "json") ||
		strings.Contains(mimeType, "yaml") || strings.Contains(mimeType, "xml") || strings.Contains(mimeType, "javascript") ||
		strings.Contains(mimeType, "x-sh")
	return textual && utf8.Valid(data) && !bytes.ContainsRune(data, 0)
}

// runCommand is run_command over MCP: a CommandRun of this Agent, judged,
// asked and sandboxed as on /v1. A command that waits for a person answers
// at once, with the run's name and the approve command. The result is the
// structured content, and its JSON the text content, as /v1/commands
// answers; the tools declare no output schema, since which fields a result
// holds depends on its phase.
func (m *mcpEndpoint) runCommand(ctx context.Context, _ *mcp.CallToolRequest, args runCommandArgs) (*mcp.CallToolResult, any, error) {
	if strings.TrimSpace(args.Command) == "" {
		return nil, nil, errNoCommand
	}
	if !m.r.ready() {
		return nil, nil, errors.New("the agent is starting: its catalog is not loaded yet; retry shortly")
	}
	if args.Skill != "" && !m.r.inCatalog(args.Skill) {
		return nil, nil, fmt.Errorf("skill %s is not in this agent's catalog", args.Skill)
	}
	var res *CommandResult
	err := runTool(ctx, ToolRunCommand, func(ctx context.Context) (err error) {
		res, err = m.r.commands.run(ctx, args.Command, args.Skill, "", false, waits{command: min(m.r.cfg.CommandWait, mcpCallWait)})
		return err
	})
	if err != nil {
		// Creating the run failed: the cause (an API error) stays in the log.
		ctrl.LoggerFrom(ctx).Error(err, "Failed to run a command for an MCP client")
		return nil, nil, errors.New("failed to file the command; the agent's log has the cause")
	}
	return nil, res, nil
}

// commandStatus is command_status over MCP: it waits for the run as
// run_command does, and while it awaits approval for the approval wait.
func (m *mcpEndpoint) commandStatus(ctx context.Context, _ *mcp.CallToolRequest, args commandStatusArgs) (*mcp.CallToolResult, any, error) {
	if strings.TrimSpace(args.Run) == "" {
		return nil, nil, errors.New("the run's name is required")
	}
	wait := min(m.r.cfg.CommandWait, mcpCallWait)
	var res *CommandResult
	err := runTool(ctx, ToolCommandStatus, func(ctx context.Context) (err error) {
		res, err = m.r.commands.get(ctx, args.Run, waits{command: wait, approval: min(m.r.cfg.ApprovalWait, wait)})
		return err
	})
	if err != nil {
		// Not found, or another agent's run: the caller named it.
		return nil, nil, err
	}
	return nil, res, nil
}
