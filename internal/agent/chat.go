package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kubeskills/kubeskills/internal/catalog"
	"github.com/kubeskills/kubeskills/internal/telemetry"
)

// Message is one message of a chat as callers send it: a role (system,
// developer, user or assistant) and its text.
type Message struct {
	Role    string
	Content string
}

// Reply is the final assistant message of a chat.
type Reply struct {
	// Content is the assistant's answer.
	Content string
	// FinishReason is why the model stopped: stop, length, content_filter,
	// or stop when the tool-call limit ended the loop.
	FinishReason string
	// ToolCalls is the number of tool calls the model made.
	ToolCalls int
	// LimitReached is true when the loop stopped at the tool-call limit.
	LimitReached bool
	// Usage adds up the tokens of every model call.
	Usage Usage
}

// Usage counts tokens.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// BadRequestError is a chat request the runtime cannot serve as sent.
type BadRequestError struct{ msg string }

// Error says what is wrong with the request.
func (e *BadRequestError) Error() string { return e.msg }

// skillNamePattern is what a skill name looks like, for `/name` messages.
var skillNamePattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Chat answers a conversation. The model is called with the Agent's system
// prompt and the skill catalog, then again after each round of tool calls,
// until it answers without calling a tool or the tool-call limit is
// reached; only that final answer is returned. A user message starting
// with `/name` loads skill name (Auto or Explicit) into the conversation
// up front.
//
// A chat the caller may retry (attempt has a key) names its CommandRuns
// after the attempt's key and the conversation (see requestKey), so that
// a retry within a few minutes follows the runs an earlier attempt filed
// instead of filing them again. Any other chat is a new question and files
// new runs, however like an earlier one it is.
func (r *Runtime) Chat(ctx context.Context, messages []Message, attempt Attempt) (*Reply, error) {
	ctx, span := r.startInvoke(ctx)
	reply, err := r.chat(ctx, messages, attempt)
	if reply != nil {
		span.SetAttributes(telemetry.InputTokens.Int64(reply.Usage.PromptTokens), telemetry.OutputTokens.Int64(reply.Usage.CompletionTokens),
			telemetry.FinishReasons.StringSlice([]string{reply.FinishReason}))
	}
	endSpan(span, err)
	r.metrics.chat(reply, err)
	return reply, err
}

// chat is Chat, uncounted.
func (r *Runtime) chat(ctx context.Context, messages []Message, attempt Attempt) (*Reply, error) {
	s := &session{r: r, explicit: map[string]bool{}, retry: attempt.Retry}
	if attempt.Key != "" {
		s.conversation = conversationHash(attempt.Key, messages)
		trace.SpanFromContext(ctx).SetAttributes(telemetry.ConversationID.String(s.conversation))
	}
	conv, err := r.conversation(ctx, s, messages)
	if err != nil {
		return nil, err
	}
	tools := toolDefinitions()
	reply := &Reply{}
	for {
		completion, err := r.model.complete(ctx, conv, tools)
		if err != nil {
			return nil, err
		}
		reply.Usage.add(completion.Usage)
		choice := completion.Choices[0]
		msg := choice.Message
		if len(msg.ToolCalls) == 0 {
			reply.Content, reply.FinishReason = msg.Content, choice.FinishReason
			if reply.Content == "" && msg.Refusal != "" {
				reply.Content = msg.Refusal
			}
			if reply.FinishReason == "" || reply.FinishReason == "tool_calls" {
				reply.FinishReason = "stop"
			}
			reply.ToolCalls = s.calls
			return reply, nil
		}
		if s.calls+len(msg.ToolCalls) > r.cfg.MaxToolCalls {
			ctrl.LoggerFrom(ctx).Info("Chat stopped at the tool-call limit", "limit", r.cfg.MaxToolCalls)
			reply.Content = limitMessage(msg.Content, r.cfg.MaxToolCalls)
			reply.FinishReason, reply.ToolCalls, reply.LimitReached = "stop", s.calls, true
			return reply, nil
		}
		conv = append(conv, msg.ToParam())
		for _, tc := range msg.ToolCalls {
			var out string
			if tc.Type != "" && tc.Type != "function" {
				out = errorJSON(fmt.Errorf("tool call %s is of type %s; only function tools exist", tc.ID, tc.Type))
			} else {
				out = s.call(ctx, tc.Function.Name, tc.ID, tc.Function.Arguments)
			}
			conv = append(conv, openai.ToolMessage(out, tc.ID))
		}
	}
}

func (u *Usage) add(v openai.CompletionUsage) {
	u.PromptTokens += v.PromptTokens
	u.CompletionTokens += v.CompletionTokens
	u.TotalTokens += v.TotalTokens
}

// limitMessage is the final answer when the tool-call limit ends a chat.
func limitMessage(content string, limit int) string {
	msg := fmt.Sprintf("I stopped before finishing: this request reached its limit of %d tool calls. "+
		"Ask me to continue, or narrow the request.", limit)
	if strings.TrimSpace(content) != "" {
		return strings.TrimSpace(content) + "\n\n" + msg
	}
	return msg
}

// conversation turns the caller's messages into the model's: the system
// prompt first, then the messages, each `/name` user message followed by
// the skill it names, loaded as if the model had called use_skill.
func (r *Runtime) conversation(ctx context.Context, s *session, messages []Message) ([]openai.ChatCompletionMessageParamUnion, error) {
	if len(messages) == 0 {
		return nil, &BadRequestError{msg: "messages must not be empty"}
	}
	conv := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(r.systemPrompt(ctx))}
	for i, m := range messages {
		switch m.Role {
		case "system", "developer":
			conv = append(conv, openai.SystemMessage(m.Content))
		case "assistant":
			conv = append(conv, openai.AssistantMessage(m.Content))
		case "user":
			conv = append(conv, openai.UserMessage(m.Content))
			conv = append(conv, r.invoke(s, m.Content, i)...)
		default:
			return nil, &BadRequestError{msg: fmt.Sprintf("messages[%d] has role %q: send system, developer, user and assistant messages; "+
				"the agent runs its tools itself", i, m.Role)}
		}
	}
	return conv, nil
}

// invoke loads the skill a `/name ...` user message names, once per
// conversation, as a use_skill call and its result. A name that is not in
// the catalog leaves the message as plain text.
func (r *Runtime) invoke(s *session, content string, index int) []openai.ChatCompletionMessageParamUnion {
	name, ok := slashName(content)
	if !ok || s.explicit[name] || !r.inCatalog(name) {
		return nil
	}
	s.explicit[name] = true
	out := ""
	if loaded, err := r.skills.Use(name, true); err != nil {
		out = errorJSON(err)
	} else {
		out = skillText(loaded)
	}
	id := fmt.Sprintf("call_user_%d_%s", index, name)
	call := openai.ChatCompletionAssistantMessageParam{
		ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
			ID:       id,
			Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: ToolUseSkill, Arguments: fmt.Sprintf(`{"name":%q}`, name)},
		}}},
	}
	return []openai.ChatCompletionMessageParamUnion{{OfAssistant: &call}, openai.ToolMessage(out, id)}
}

// slashName returns the skill name of a message starting with `/name`,
// followed by white space or nothing.
func slashName(content string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimLeft(content, " \t\r\n"), "/")
	if !ok {
		return "", false
	}
	name := rest
	if end := strings.IndexFunc(rest, unicode.IsSpace); end >= 0 {
		name = rest[:end]
	}
	return name, len(name) <= 64 && skillNamePattern.MatchString(name)
}

func (r *Runtime) inCatalog(name string) bool {
	if c := r.skills.Catalog(); c != nil {
		for _, e := range c.Skills {
			if e.Name == name {
				return true
			}
		}
	}
	return false
}

// systemPrompt is the Agent's instructions, then how skills and commands
// work, then the `<available_skills>` block: Auto skills by name and
// description only.
func (r *Runtime) systemPrompt(ctx context.Context) string {
	var b strings.Builder
	if c := r.skills.Catalog(); c != nil && strings.TrimSpace(c.Instructions) != "" {
		b.WriteString(strings.TrimSpace(c.Instructions))
		b.WriteString("\n\n")
	}
	block, listed, omitted := r.skills.Prompt(r.cfg.PromptBudgetTokens)
	if omitted > 0 {
		ctrl.LoggerFrom(ctx).V(1).Info("Skills left out of the prompt by its budget", "listed", listed, "omitted", omitted,
			"budgetTokens", r.cfg.PromptBudgetTokens)
	}
	b.WriteString("Skills are instructions for particular tasks. ")
	if block != "" {
		b.WriteString("The skills in <available_skills> are listed by name and description only: when a task matches one, " +
			"call use_skill with its name to load its instructions, then follow them. ")
	}
	b.WriteString("read_skill_file reads the files a skill bundles. Other skills are used only when the user names them as /name.\n\n" +
		"You have no shell. run_command asks for a shell command to run in a sandboxed Job: a policy decides whether it runs, " +
		"and some commands wait for a person to approve them. Pass the skill a command serves. " +
		"Report what commands print as it is, and say so when a command was denied, is awaiting approval or waits in line.\n")
	if block != "" {
		b.WriteString("\n")
		b.WriteString(block)
	}
	return b.String()
}

// isBadRequest tells whether err is the caller's fault.
func isBadRequest(err error) bool {
	var bad *BadRequestError
	return errors.As(err, &bad)
}

// The tools the model may call.
const (
	// ToolUseSkill loads a skill's instructions: use_skill(name).
	ToolUseSkill = "use_skill"
	// ToolReadSkillFile reads a file bundled with a skill:
	// read_skill_file(name, path).
	ToolReadSkillFile = "read_skill_file"
	// ToolRunCommand runs a command through a CommandRun:
	// run_command(command, skill?).
	ToolRunCommand = "run_command"
	// ToolCommandStatus waits again for a command started earlier, such as
	// one that was awaiting approval: command_status(run).
	ToolCommandStatus = "command_status"
)

// toolDefinitions are the tools offered to the model, in the OpenAI
// function-calling shape.
func toolDefinitions() []openai.ChatCompletionToolUnionParam {
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	tool := func(name, desc string, props map[string]any, required ...string) openai.ChatCompletionToolUnionParam {
		return openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name:        name,
			Description: openai.String(desc),
			Parameters: openai.FunctionParameters{
				"type": "object", "properties": props, "required": required, "additionalProperties": false,
			},
		})
	}
	return []openai.ChatCompletionToolUnionParam{
		tool(ToolUseSkill, "Load the full instructions of a skill listed in <available_skills> (or one the user named as /name) before following it.",
			map[string]any{"name": str("The skill's name.")}, "name"),
		tool(ToolReadSkillFile, "Read a file bundled with a skill, such as a reference or a script, by the path use_skill listed.",
			map[string]any{"name": str("The skill's name."), "path": str("The file's path inside the skill, e.g. references/guide.md.")}, "name", "path"),
		tool(ToolRunCommand, "Run a shell command in a sandboxed Job. A policy decides whether it runs; some commands wait for a person to approve them. "+
			"Returns JSON with phase, exitCode, stdout, stderr, stdoutTruncated, stderrTruncated and the policy decision.",
			map[string]any{"command": str("The shell command line."), "skill": str("The skill the command serves, if any: its files are mounted for the command.")}, "command"),
		tool(ToolCommandStatus, "Wait for a command started earlier, for example one that was awaiting approval, and return its result as run_command does.",
			map[string]any{"run": str("The run's name, as run_command returned it.")}, "run"),
	}
}

// session is the state of one chat request: which Explicit skills the user
// named, how many tool calls the model made and how many commands it asked
// for, the hash of the caller's conversation (empty when the caller will
// not retry it), and whether this is a retry.
type session struct {
	r            *Runtime
	explicit     map[string]bool
	calls        int
	commands     int
	conversation string
	retry        bool
}

// Attempt is what a caller says of a chat request it may send again: Key
// names the request and its caller, the same on every attempt; Retry is
// true when an earlier attempt may have run. The zero Attempt is a request
// that will not be retried.
type Attempt struct {
	Key   string
	Retry bool
}

// conversationHash identifies a chat request by its attempt's key and the
// messages the caller sent, which a retry sends again unchanged.
func conversationHash(key string, messages []Message) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s", len(key), key)
	for _, m := range messages {
		fmt.Fprintf(h, "%d:%s%d:%s", len(m.Role), m.Role, len(m.Content), m.Content)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// requestKey identifies the nth command a chat asks for: the conversation,
// n, the command and its skill. A retried request whose model asks for the
// same command at the same point gets the same key. The model's tool call
// id is left out: models make a new one for every answer.
func requestKey(conversation string, n int, command, skill string) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d:%s\x00%s", conversation, n, len(command), command, skill))
	return hex.EncodeToString(sum[:])
}

// call runs one tool call and returns what the model gets back: the tool's
// result, or a JSON object with an error.
func (s *session) call(ctx context.Context, name, id, arguments string) string {
	s.calls++
	known := name
	if !slices.Contains([]string{ToolUseSkill, ToolReadSkillFile, ToolRunCommand, ToolCommandStatus}, name) {
		known = "unknown"
	}
	var out string
	var err error
	ctx, span := startTool(ctx, known, id)
	defer func() { endSpan(span, err) }()
	switch name {
	case ToolUseSkill:
		out, err = s.useSkill(ctx, arguments)
	case ToolReadSkillFile:
		out, err = s.readSkillFile(ctx, arguments)
	case ToolRunCommand:
		out, err = s.runCommand(ctx, arguments)
	case ToolCommandStatus:
		out, err = s.commandStatus(ctx, arguments)
	default:
		err = fmt.Errorf("there is no tool %q; the tools are %s, %s, %s and %s", name, ToolUseSkill, ToolReadSkillFile, ToolRunCommand, ToolCommandStatus)
	}
	s.r.metrics.toolCall(known)
	if err != nil {
		err = forModel(ctx, known, err)
		ctrl.LoggerFrom(ctx).V(1).Info("Tool call failed", "tool", known, "error", err.Error())
		return errorJSON(err)
	}
	return out
}

// forModel is what the model reads of a failed tool call. An error of the
// Kubernetes API holds identities, resource names and admission messages
// that are the cluster's business, and the model may repeat what it reads
// to whoever chats: it gets the error's reason and the request id, and the
// log the whole error.
func forModel(ctx context.Context, tool string, err error) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return err
	}
	ctrl.LoggerFrom(ctx).Error(err, "Tool call failed at the Kubernetes API", "tool", tool)
	return fmt.Errorf("the Kubernetes API refused %s (%s); the agent's log has the details under request id %s",
		tool, apierrors.ReasonForError(err), requestID(ctx))
}

// useSkill loads a skill's body.
func (s *session) useSkill(ctx context.Context, arguments string) (string, error) {
	var args struct {
		Name string `json:"name"`
	}
	if err := decodeArgs(arguments, &args, &args.Name); err != nil {
		return "", err
	}
	trace.SpanFromContext(ctx).SetAttributes(telemetry.SkillName.String(args.Name))
	loaded, err := s.r.skills.Use(args.Name, s.explicit[args.Name])
	if err != nil {
		return "", err
	}
	return skillText(loaded), nil
}

// skillText is how a loaded skill enters the conversation.
func skillText(l *catalog.Loaded) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<skill name=%q>\n%s", l.Name, l.Instructions)
	if !strings.HasSuffix(l.Instructions, "\n") {
		b.WriteString("\n")
	}
	b.WriteString("</skill>\n")
	if len(l.Files) > 0 {
		fmt.Fprintf(&b, "Files bundled with %s (read them with %s): %s\n", l.Name, ToolReadSkillFile, strings.Join(l.Files, ", "))
	}
	return b.String()
}

// readSkillFile reads a bundled text file, confined to the skill.
func (s *session) readSkillFile(ctx context.Context, arguments string) (string, error) {
	var args struct {
		Name string `json:"name"`
		Path string `json:"path"`
	}
	if err := decodeArgs(arguments, &args, &args.Name, &args.Path); err != nil {
		return "", err
	}
	trace.SpanFromContext(ctx).SetAttributes(telemetry.SkillName.String(args.Name), telemetry.SkillResourceName.String(args.Path))
	if err := s.usable(args.Name); err != nil {
		return "", err
	}
	data, err := s.r.skills.ReadFile(args.Name, args.Path, s.r.cfg.MaxFileBytes)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(data) {
		return "", fmt.Errorf("file %s of skill %s is binary (%d bytes); run it with %s instead of reading it", args.Path, args.Name, len(data), ToolRunCommand)
	}
	return string(data), nil
}

// runCommand runs a command and returns its result as JSON.
func (s *session) runCommand(ctx context.Context, arguments string) (string, error) {
	var args struct {
		Command string `json:"command"`
		Skill   string `json:"skill"`
	}
	if err := decodeArgs(arguments, &args, &args.Command); err != nil {
		return "", err
	}
	if args.Skill != "" {
		trace.SpanFromContext(ctx).SetAttributes(telemetry.SkillName.String(args.Skill))
		if err := s.usable(args.Skill); err != nil {
			return "", err
		}
	}
	s.commands++
	key := ""
	if s.conversation != "" {
		key = requestKey(s.conversation, s.commands, args.Command, args.Skill)
	}
	res, err := s.r.commands.run(ctx, args.Command, args.Skill, key, s.retry, s.r.commands.defaults())
	if err != nil {
		return "", err
	}
	return resultJSON(res), nil
}

// commandStatus waits again for a run made earlier.
func (s *session) commandStatus(ctx context.Context, arguments string) (string, error) {
	var args struct {
		Run string `json:"run"`
	}
	if err := decodeArgs(arguments, &args, &args.Run); err != nil {
		return "", err
	}
	res, err := s.r.commands.get(ctx, args.Run, s.r.commands.defaults())
	if err != nil {
		return "", err
	}
	return resultJSON(res), nil
}

// usable checks that a skill is in the catalog and, when it is Explicit,
// that the user named it in this conversation.
func (s *session) usable(name string) error {
	c := s.r.skills.Catalog()
	if c != nil {
		for _, e := range c.Skills {
			if e.Name != name {
				continue
			}
			if e.Invocation == catalog.InvocationExplicit && !s.explicit[name] {
				return fmt.Errorf("skill %s: %w; the user can ask for it as /%s", name, catalog.ErrExplicitOnly, name)
			}
			return nil
		}
	}
	return fmt.Errorf("skill %s: %w", name, catalog.ErrNotFound)
}

// decodeArgs decodes a tool call's JSON arguments and checks that the
// required ones are there.
func decodeArgs(arguments string, into any, required ...*string) error {
	if strings.TrimSpace(arguments) == "" {
		arguments = "{}"
	}
	if err := json.Unmarshal([]byte(arguments), into); err != nil {
		return fmt.Errorf("the arguments are not a JSON object of strings: %w", err)
	}
	for _, r := range required {
		if strings.TrimSpace(*r) == "" {
			return errors.New("a required argument is missing; see the tool's parameters")
		}
	}
	return nil
}

// resultJSON is a command result as the model reads it.
func resultJSON(res *CommandResult) string {
	data, err := json.Marshal(res)
	if err != nil {
		return errorJSON(fmt.Errorf("failed to encode the result of CommandRun %s: %w", res.Run, err))
	}
	return string(data)
}

// errorJSON is a failed tool call as the model reads it.
func errorJSON(err error) string {
	data, _ := json.Marshal(map[string]string{"error": err.Error()})
	return string(data)
}
