// Package agent is the kubeskills agent runtime: what runs in an Agent's
// pods.
//
// It serves the Agent's skill catalog to a model with progressive
// disclosure: the system prompt lists only the names and descriptions of
// the Auto skills, and a skill's body enters the conversation only when the
// model calls use_skill (or the user names the skill as `/name ...`). The
// model never gets a shell: run_command creates a CommandRun, which the
// operator judges against the Agent's CommandPolicy and runs as a sandboxed
// Job, and the runtime watches it until it ends and hands its result back.
//
// The model is any OpenAI-compatible chat completions endpoint, called with
// the official OpenAI Go SDK. The tool loop runs in the runtime, which
// serves an OpenAI-compatible chat endpoint of its own, a small REST API
// (catalog, skill, command), health probes and Prometheus metrics; see
// Handler.
package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeskills/kubeskills/internal/catalog"
)

// Skills is what the runtime needs from the skill catalog. *catalog.Store
// implements it. It hands out the catalog only: its revision is computed
// from the one catalog read (Catalog.Revision), never read on its own,
// since a reload between two reads would pair entries and a revision of
// different snapshots.
type Skills interface {
	// Catalog returns the catalog being served. It is never changed once
	// handed out: a reload serves a new one.
	Catalog() *catalog.Catalog
	// Reloads returns how many reloads succeeded and failed.
	Reloads() (ok, failed int)
	// Prompt returns the `<available_skills>` block within a token budget.
	Prompt(budgetTokens int) (block string, listed, omitted int)
	// Use loads a skill's body; Explicit skills only when explicit is true.
	Use(name string, explicit bool) (*catalog.Loaded, error)
	// ReadFile reads a file bundled with a skill.
	ReadFile(name, path string, maxBytes int) ([]byte, error)
}

var _ Skills = (*catalog.Store)(nil)

// Config is how a runtime behaves, resolved once at start.
type Config struct {
	// Agent is the Agent's name: CommandRuns are made for it.
	Agent string
	// Namespace is the Agent's namespace, where CommandRuns are made.
	Namespace string
	// Identity is the user the runtime authenticates as, recorded in each
	// CommandRun's spec.requestedBy (system:serviceaccount:NS:SA in a pod).
	Identity string
	// Model is the model endpoint.
	Model ModelConfig
	// MaxToolCalls bounds the tool calls of one chat request.
	MaxToolCalls int
	// PromptBudgetTokens bounds the `<available_skills>` block.
	PromptBudgetTokens int
	// MaxFileBytes bounds a file read_skill_file returns.
	MaxFileBytes int
	// CommandWait bounds how long a command is waited for.
	CommandWait time.Duration
	// ApprovalWait bounds how long a command awaiting approval is waited
	// for before the model is told so.
	ApprovalWait time.Duration
	// TokenFile holds the bearer token callers of the API must send.
	TokenFile string
	// DisableAuth serves the API without a token, /metrics included.
	DisableAuth bool
	// KubeConfig reaches the API server, which says who may read
	// /metrics; its credentials are never used for that (see metricsGate).
	// Required unless auth is disabled.
	KubeConfig *rest.Config
	// DisableMCP serves no /mcp endpoint.
	DisableMCP bool
	// Server bounds what callers of the API can hold.
	Server ServerLimits
}

// Defaults of Config.
const (
	DefaultMaxToolCalls       = 20
	DefaultPromptBudgetTokens = 8000
	DefaultMaxFileBytes       = 64 << 10
	DefaultCommandWait        = 5 * time.Minute
	DefaultApprovalWait       = 30 * time.Second
)

// withDefaults fills in what is unset and checks what is required.
func (c Config) withDefaults() (Config, error) {
	if c.Agent == "" || c.Namespace == "" {
		return c, errors.New("failed to configure the runtime: the agent's name and namespace are required")
	}
	if c.Identity == "" {
		return c, errors.New("failed to configure the runtime: the runtime's identity is required")
	}
	if c.TokenFile == "" && !c.DisableAuth {
		return c, errors.New("failed to configure the runtime: a token file is required unless auth is disabled")
	}
	if c.KubeConfig == nil && !c.DisableAuth {
		return c, errors.New("failed to configure the runtime: a Kubernetes config, to check who may read /metrics, is required unless auth is disabled")
	}
	if c.MaxToolCalls <= 0 {
		c.MaxToolCalls = DefaultMaxToolCalls
	}
	if c.PromptBudgetTokens <= 0 {
		c.PromptBudgetTokens = DefaultPromptBudgetTokens
	}
	if c.MaxFileBytes <= 0 {
		c.MaxFileBytes = DefaultMaxFileBytes
	}
	if c.CommandWait <= 0 {
		c.CommandWait = DefaultCommandWait
	}
	if c.ApprovalWait <= 0 {
		c.ApprovalWait = DefaultApprovalWait
	}
	c.ApprovalWait = min(c.ApprovalWait, c.CommandWait)
	c.Server = c.Server.withDefaults()
	return c, nil
}

// Runtime is one agent: its catalog, its model, its commands and its API.
// It is safe for concurrent use.
type Runtime struct {
	cfg      Config
	skills   Skills
	model    *model
	commands *commander
	token    *secretFile
	mcp      *mcpEndpoint
	metrics  *metrics
	log      logr.Logger

	// metricsGate admits scrapes of /metrics; nil when auth is disabled.
	metricsGate *metricsGate
}

// New returns a runtime serving skills, calling the model of cfg, and
// making CommandRuns with kube, a client that can watch them.
func New(cfg Config, skills Skills, kube client.WithWatch, log logr.Logger) (*Runtime, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if skills == nil || kube == nil {
		return nil, fmt.Errorf("failed to create the runtime of agent %s: a catalog and a Kubernetes client are required", cfg.Agent)
	}
	m := newMetrics(skills)
	mdl, err := newModel(cfg.Model, m, log)
	if err != nil {
		return nil, err
	}
	r := &Runtime{cfg: cfg, skills: skills, model: mdl, metrics: m, log: log}
	r.commands = &commander{
		kube: kube, namespace: cfg.Namespace, agent: cfg.Agent, identity: cfg.Identity,
		wait: cfg.CommandWait, approvalWait: cfg.ApprovalWait, metrics: m,
	}
	if !cfg.DisableAuth {
		r.token = newSecretFile(cfg.TokenFile, "token", log)
		r.metricsGate = newMetricsGate(cfg.KubeConfig)
	}
	if !cfg.DisableMCP {
		if r.mcp, err = newMCPEndpoint(r); err != nil {
			return nil, fmt.Errorf("failed to create the MCP endpoint of agent %s: %w", cfg.Agent, err)
		}
		m.mcpSessions(r.mcp.sessions)
	}
	return r, nil
}

// serviceAccountNamespaceFile holds the pod's namespace in a pod.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Options are cmd/agent's flags, one field per flag of the same name (see
// BindFlags). The Agent controller sets them on the runtime's container.
type Options struct {
	Agent              string
	Namespace          string
	Identity           string
	Listen             string
	CatalogDir         string
	SkillsDir          string
	CatalogPoll        time.Duration
	ModelBaseURL       string
	ModelName          string
	APIKeyFile         string
	Temperature        string
	MaxTokens          int
	ModelTimeout       time.Duration
	ModelRetries       int
	MaxToolCalls       int
	PromptBudgetTokens int
	TokenFile          string
	DisableAuth        bool
	MCP                bool
	CommandWait        time.Duration
	ApprovalWait       time.Duration
	Server             ServerLimits
}

// BindFlags registers the options as command-line flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Agent, "agent", "", "Name of the Agent this runtime serves.")
	fs.StringVar(&o.Namespace, "namespace", "", "Namespace of the Agent; defaults to the pod's namespace.")
	fs.StringVar(&o.Identity, "identity", "", "User the runtime authenticates as, recorded as spec.requestedBy of its CommandRuns "+
		"(system:serviceaccount:NS:SA in a pod); asked of the API server when empty.")
	fs.StringVar(&o.Listen, "listen", ":8080", "Address the HTTP API listens on.")
	fs.StringVar(&o.CatalogDir, "catalog-dir", catalog.CatalogDir, "Folder where the catalog ConfigMaps are mounted.")
	fs.StringVar(&o.SkillsDir, "skills-dir", catalog.SkillsDir, "Folder where the skills' ConfigMaps are mounted.")
	fs.DurationVar(&o.CatalogPoll, "catalog-poll", catalog.DefaultPollInterval, "How often the mounted catalog is checked for changes.")
	fs.StringVar(&o.ModelBaseURL, "model-base-url", "", "Base URL of the OpenAI-compatible API, e.g. https://api.openai.com/v1.")
	fs.StringVar(&o.ModelName, "model-name", "", "Name of the model at that API.")
	fs.StringVar(&o.APIKeyFile, "api-key-file", "", "File holding the model API key, read again when it changes; empty sends no key.")
	fs.StringVar(&o.Temperature, "temperature", "", "Sampling temperature, 0 to 2; empty leaves it to the model.")
	fs.IntVar(&o.MaxTokens, "max-tokens", 0, "Most tokens in one model answer; 0 sends no limit.")
	fs.DurationVar(&o.ModelTimeout, "model-timeout", DefaultModelTimeout, "Timeout of one attempt of a model call.")
	fs.IntVar(&o.ModelRetries, "model-retries", DefaultModelRetries, "Retries of a model call on connection errors, 429 and 5xx, with backoff.")
	fs.IntVar(&o.MaxToolCalls, "max-tool-calls", DefaultMaxToolCalls, "Most tool calls the model may make for one request.")
	fs.IntVar(&o.PromptBudgetTokens, "prompt-budget-tokens", DefaultPromptBudgetTokens, "Token budget of the skill list in the system prompt.")
	fs.StringVar(&o.TokenFile, "token-file", "", "File holding the bearer token callers of the API must send, read again when it changes.")
	fs.BoolVar(&o.DisableAuth, "disable-auth", false, "Serve the API without a bearer token. Use only behind another gate.")
	fs.BoolVar(&o.MCP, "mcp", true, "Serve the Model Context Protocol at /mcp, beside /v1 and behind the same token.")
	fs.DurationVar(&o.CommandWait, "command-wait", DefaultCommandWait, "How long a command is waited for before the model is told it still runs.")
	fs.DurationVar(&o.ApprovalWait, "approval-wait", DefaultApprovalWait, "How long a command awaiting approval is waited for before the model is told so.")
	o.Server.bindFlags(fs)
}

// Config resolves the options into a runtime's Config. The identity may
// still be empty: see WhoAmI.
func (o *Options) Config() (Config, error) {
	cfg := Config{
		Agent: o.Agent, Namespace: o.Namespace, Identity: o.Identity,
		Model: ModelConfig{
			BaseURL: o.ModelBaseURL, Name: o.ModelName, APIKeyFile: o.APIKeyFile,
			MaxTokens: int64(o.MaxTokens), Timeout: o.ModelTimeout, MaxRetries: o.ModelRetries,
		},
		MaxToolCalls: o.MaxToolCalls, PromptBudgetTokens: o.PromptBudgetTokens,
		CommandWait: o.CommandWait, ApprovalWait: o.ApprovalWait,
		TokenFile: o.TokenFile, DisableAuth: o.DisableAuth, DisableMCP: !o.MCP, Server: o.Server,
	}
	if o.Agent == "" || o.ModelBaseURL == "" || o.ModelName == "" {
		return cfg, errors.New("failed to read flags: --agent, --model-base-url and --model-name are required")
	}
	if o.TokenFile == "" && !o.DisableAuth {
		return cfg, errors.New("failed to read flags: --token-file is required unless --disable-auth is set")
	}
	if t := strings.TrimSpace(o.Temperature); t != "" {
		v, err := strconv.ParseFloat(t, 64)
		if err != nil || v < 0 || v > 2 {
			return cfg, fmt.Errorf("failed to read flags: --temperature %q is not a number from 0 to 2", o.Temperature)
		}
		cfg.Model.Temperature = &v
	}
	if cfg.Namespace == "" {
		data, err := os.ReadFile(serviceAccountNamespaceFile)
		if err != nil {
			return cfg, fmt.Errorf("failed to read flags: --namespace is empty and the pod's namespace is unknown: %w", err)
		}
		cfg.Namespace = strings.TrimSpace(string(data))
	}
	return cfg, nil
}

// WhoAmI asks the API server which user the client authenticates as, with
// a SelfSubjectReview: the identity admission checks spec.requestedBy
// against.
func WhoAmI(ctx context.Context, c client.Client) (string, error) {
	review := &authnv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("failed to ask the API server who the runtime is: %w", err)
	}
	if review.Status.UserInfo.Username == "" {
		return "", errors.New("failed to ask the API server who the runtime is: it answered with no username")
	}
	return review.Status.UserInfo.Username, nil
}
