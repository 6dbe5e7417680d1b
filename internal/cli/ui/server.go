package ui

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli/approval"
	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
	"github.com/kubeskills/kubeskills/internal/cli/ui/guard"
	"github.com/kubeskills/kubeskills/internal/cli/ui/render"
)

//go:embed templates static
var files embed.FS

// server serves the console's pages for one person.
type server struct {
	c client.WithWatch
	// cfg is the person's REST config, for port-forwards to agents.
	cfg *rest.Config
	// user is the person, as the API server knows them.
	user string
	// ns is the namespace shown; "" for every namespace.
	ns    string
	guard *guard.Guard
	pages map[string]*template.Template
	// stop ends the event streams when the console stops.
	stop   context.Context
	cancel context.CancelFunc
	chats  chats
	// flashes hold the errors of writes, for the page the browser is sent
	// to next.
	flashes flashes
}

// pageNames are the templates of templates/, each a page that fills the
// layout.
var pageNames = []string{"inbox", "runs", "run", "skills", "skill", "agent", "policy", "error"}

func newServer(cfg *rest.Config, c client.WithWatch, user, ns string, g *guard.Guard) (*server, error) {
	s := &server{cfg: cfg, c: c, user: user, ns: ns, guard: g, pages: map[string]*template.Template{}}
	s.stop, s.cancel = context.WithCancel(context.Background())
	funcs := template.FuncMap{
		"since": func(t time.Time) string { return render.Duration(time.Since(t).Truncate(time.Second)) },
		"text":  render.Text,
		"lower": strings.ToLower,
		"last":  func(m []render.Mark) int { return len(m) - 1 },
		"add":   func(a, b float64) float64 { return a + b },
		"sub":   func(a, b float64) float64 { return a - b },
	}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/parts.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("failed to parse the page %s: %w", name, err)
		}
		s.pages[name] = t
	}
	return s, nil
}

// close ends the event streams.
func (s *server) close() { s.cancel() }

// routes are the console's pages, behind the guard.
func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(files, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "icon.svg")
	})
	mux.HandleFunc("GET /{$}", s.inbox)
	mux.HandleFunc("GET /events", s.events)
	mux.HandleFunc("GET /runs", s.runs)
	mux.HandleFunc("GET /runs/{ns}/{name}", s.run)
	mux.HandleFunc("POST /runs/{ns}/{name}/decide", s.decide)
	mux.HandleFunc("GET /skills", s.skills)
	mux.HandleFunc("GET /skills/{ns}/{name}", s.skill)
	mux.HandleFunc("GET /agents/{ns}/{name}", s.agent)
	mux.HandleFunc("POST /agents/{ns}/{name}/chat", s.chat)
	mux.HandleFunc("GET /policies/{ns}/{name}", s.policy)
	return mux
}

// page is what every page's layout shows, and the page's own data.
type page struct {
	Title, Nav string
	User       string
	Namespace  string
	CSRF       string
	// Error is a refusal or failure to show above the page, in one line.
	Error string
	// Notice says what a write did.
	Notice string
	Data   any
}

// show renders a page; status is the HTTP status to answer with.
func (s *server) show(w http.ResponseWriter, status int, name string, p page) {
	p.User, p.CSRF = cmdline.Printable(s.user), s.guard.CSRF()
	p.Namespace = s.ns
	if p.Namespace == "" {
		p.Namespace = "every namespace"
	}
	var b bytes.Buffer
	if err := s.pages[name].Execute(&b, p); err != nil {
		http.Error(w, "failed to render the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// fail shows a page that could not be read, with why, in one line.
func (s *server) fail(w http.ResponseWriter, title string, err error) {
	status, msg := http.StatusBadGateway, cmdline.OneLine(cmdline.APIMessage(err))
	switch {
	case apierrors.IsNotFound(err):
		status = http.StatusNotFound
	case apierrors.IsForbidden(err):
		status = http.StatusForbidden
		msg += " (the ClusterRole kubeskills-viewer, or Kubernetes' view, lets you read every kubeskills kind; ask for a RoleBinding to it)"
	}
	s.show(w, status, "error", page{Title: title, Error: msg})
}

// inScope tells whether a namespace in a URL is one the console shows.
func (s *server) inScope(ns string) bool { return s.ns == "" || ns == s.ns }

// listRuns lists the runs the console shows, newest first.
func (s *server) listRuns(ctx context.Context) ([]skillsv1.CommandRun, error) {
	var list skillsv1.CommandRunList
	if err := s.c.List(ctx, &list, client.InNamespace(s.ns)); err != nil {
		return nil, err
	}
	slices.SortFunc(list.Items, func(a, b skillsv1.CommandRun) int {
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return list.Items, nil
}

// inbox shows every run waiting for a person, oldest deadline first.
func (s *server) inbox(w http.ResponseWriter, r *http.Request) {
	runs, err := s.listRuns(r.Context())
	if err != nil {
		s.fail(w, "Approvals", err)
		return
	}
	var waiting []runView
	for i := range runs {
		if runs[i].Status.Phase == skillsv1.PhaseAwaitingApproval {
			waiting = append(waiting, s.view(r.Context(), &runs[i], false))
		}
	}
	slices.SortStableFunc(waiting, func(a, b runView) int { return strings.Compare(a.Deadline, b.Deadline) })
	s.show(w, http.StatusOK, "inbox", page{Title: "Approvals", Nav: "inbox", Data: waiting})
}

// runFilter is what the runs page shows.
type runFilter struct {
	Agent, Phase, Since string
	Phases, Sinces      []string
	Runs                []runView
}

// runPhases are the phases the runs page filters by.
var runPhases = []string{string(skillsv1.PhasePending), string(skillsv1.PhaseAwaitingApproval), string(skillsv1.PhaseRunning),
	string(skillsv1.PhaseSucceeded), string(skillsv1.PhaseFailed), string(skillsv1.PhaseTimedOut), string(skillsv1.PhaseDenied),
	string(skillsv1.PhaseExpired)}

// sinceChoices are the ages the runs page filters by, in order.
var sinceChoices = []struct {
	name string
	age  time.Duration
}{{"15m", 15 * time.Minute}, {"1h", time.Hour}, {"24h", 24 * time.Hour}, {"7d", 7 * 24 * time.Hour}}

// runs lists runs, filtered by agent, phase and age.
func (s *server) runs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := runFilter{Agent: q.Get("agent"), Phase: q.Get("phase"), Since: q.Get("since"), Phases: runPhases}
	var since time.Duration
	for _, c := range sinceChoices {
		f.Sinces = append(f.Sinces, c.name)
		if c.name == f.Since {
			since = c.age
		}
	}
	runs, err := s.listRuns(r.Context())
	if err != nil {
		s.fail(w, "Runs", err)
		return
	}
	for i := range runs {
		run := &runs[i]
		if (f.Agent != "" && run.Spec.Agent != f.Agent) || (f.Phase != "" && string(run.Status.Phase) != f.Phase) ||
			(since > 0 && time.Since(run.CreationTimestamp.Time) > since) {
			continue
		}
		f.Runs = append(f.Runs, s.view(r.Context(), run, false))
	}
	s.show(w, http.StatusOK, "runs", page{Title: "Runs", Nav: "runs", Data: f})
}

// run shows one run.
func (s *server) run(w http.ResponseWriter, r *http.Request) {
	s.showRun(w, r, s.flashes.take(r.URL.Query().Get("problem")), r.URL.Query().Get("decided"))
}

// showRun shows one run, with an error or a notice above it.
func (s *server) showRun(w http.ResponseWriter, r *http.Request, problem, notice string) {
	key := client.ObjectKey{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}
	title := "Run " + key.Name
	run := &skillsv1.CommandRun{}
	if err := s.get(r.Context(), key, run); err != nil {
		s.fail(w, title, err)
		return
	}
	switch notice {
	case "approve":
		notice = "Your approval was recorded" + approval.SoFar(run, skillsv1.Approved) + "."
	case "deny":
		notice = "Your denial was recorded."
	default:
		notice = ""
	}
	s.show(w, http.StatusOK, "run", page{Title: title, Nav: "runs", Error: problem, Notice: notice, Data: s.view(r.Context(), run, true)})
}

// decide writes the person's approval or denial of a run: the same
// spec.approvals entry `kubectl skills approve` writes, as the person, on
// the decision the page showed them. Either way it sends the browser to
// the run's page (post, redirect, get), with what it did or why it failed.
func (s *server) decide(w http.ResponseWriter, r *http.Request) {
	key := client.ObjectKey{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}
	verb := r.PostForm.Get("decision")
	decision := map[string]skillsv1.ApprovalDecision{"approve": skillsv1.Approved, "deny": skillsv1.Denied}[verb]
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	var problem error
	shown, err := approval.ParseDecisionKey(r.PostForm.Get("shown"))
	switch {
	case !s.inScope(key.Namespace):
		problem = fmt.Errorf("namespace %s is not shown by this console", key.Namespace)
	case decision == "":
		problem = errors.New("choose Approve or Deny")
		verb = "decide on"
	case utf8.RuneCountInString(reason) > approval.MaxReason:
		problem = fmt.Errorf("the reason is %d characters long, at most %d are allowed", utf8.RuneCountInString(reason), approval.MaxReason)
	case err != nil:
		problem = err
	}
	if problem != nil {
		s.redirect(w, r, "/runs/"+key.Namespace+"/"+key.Name, fmt.Sprintf("failed to %s commandrun %s: %v", verb, key, problem))
		return
	}
	entry := &skillsv1.Approval{Decision: decision, Approver: s.user, Reason: reason}
	if _, err := approval.Set(r.Context(), s.c, key, entry, shown); err != nil {
		s.redirect(w, r, "/runs/"+key.Namespace+"/"+key.Name, approval.Explain(err, verb, key).Error())
		return
	}
	http.Redirect(w, r, "/runs/"+key.Namespace+"/"+key.Name+"?decided="+verb, http.StatusSeeOther)
}

// skillRow is a Skill in the catalog.
type skillRow struct {
	Namespace, Name, Description, Ready, Message string
	Warnings                                     int
}

// skills lists the Skills, with their Ready state and warnings.
func (s *server) skills(w http.ResponseWriter, r *http.Request) {
	var list skillsv1.SkillList
	if err := s.c.List(r.Context(), &list, client.InNamespace(s.ns)); err != nil {
		s.fail(w, "Skills", err)
		return
	}
	var rows []skillRow
	for _, sk := range list.Items {
		ready, message := condition(sk.Status.Conditions, skillsv1.ReadyCondition)
		rows = append(rows, skillRow{Namespace: sk.Namespace, Name: sk.Name, Description: sk.Spec.Description,
			Ready: ready, Message: message, Warnings: len(sk.Status.Warnings)})
	}
	s.show(w, http.StatusOK, "skills", page{Title: "Skills", Nav: "skills", Data: rows})
}

// skillView is a Skill's page.
type skillView struct {
	Skill          *skillsv1.Skill
	Ready, Message string
	Body           template.HTML
	Files          []fileRow
}

// fileRow is a bundled file of a Skill.
type fileRow struct {
	Path       string
	Bytes      int
	Executable bool
}

// skill shows a Skill: its SKILL.md rendered, its files, and why it was
// refused, if it was.
func (s *server) skill(w http.ResponseWriter, r *http.Request) {
	key := client.ObjectKey{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}
	sk := &skillsv1.Skill{}
	if err := s.get(r.Context(), key, sk); err != nil {
		s.fail(w, "Skill "+key.Name, err)
		return
	}
	v := skillView{Skill: sk, Body: render.Markdown(sk.Spec.Instructions)}
	v.Ready, v.Message = condition(sk.Status.Conditions, skillsv1.ReadyCondition)
	for _, f := range sk.Spec.Files {
		n := len(f.BinaryContent)
		if f.Content != nil {
			n = len(*f.Content)
		}
		v.Files = append(v.Files, fileRow{Path: f.Path, Bytes: n, Executable: f.Executable})
	}
	s.show(w, http.StatusOK, "skill", page{Title: "Skill " + sk.Name, Nav: "skills", Data: v})
}

// agentView is an Agent's page.
type agentView struct {
	Agent          *skillsv1.Agent
	Ready, Message string
	Policy         string
	// Chat is this console's conversation with the agent; CSRF is the
	// console's token, for the chat's form.
	Chat []chatMessage
	CSRF string
}

// agent shows an Agent: its status, catalog and policy, and the chat.
func (s *server) agent(w http.ResponseWriter, r *http.Request) {
	s.showAgent(w, r, s.flashes.take(r.URL.Query().Get("problem")))
}

// showAgent shows an Agent, with an error above it.
func (s *server) showAgent(w http.ResponseWriter, r *http.Request, problem string) {
	key := client.ObjectKey{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}
	a := &skillsv1.Agent{}
	if err := s.get(r.Context(), key, a); err != nil {
		s.fail(w, "Agent "+key.Name, err)
		return
	}
	v := agentView{Agent: a, CSRF: s.guard.CSRF()}
	v.Ready, v.Message = condition(a.Status.Conditions, skillsv1.ReadyCondition)
	if a.Spec.PolicyRef != nil {
		v.Policy = a.Spec.PolicyRef.Name
	}
	for _, m := range s.chats.get(key) {
		v.Chat = append(v.Chat, chatMessage{Role: m.Role, Content: render.Text(m.Content)})
	}
	s.show(w, http.StatusOK, "agent", page{Title: "Agent " + a.Name, Nav: "runs", Error: problem, Data: v})
}

// redirect sends the browser to path after a write, with problem, when
// there is one, kept for the page to show: only its random key is in the
// URL, so no link can put words of its own on a console page.
func (s *server) redirect(w http.ResponseWriter, r *http.Request, path, problem string) {
	if problem != "" {
		key, err := s.flashes.put(problem)
		if err != nil {
			http.Error(w, problem, http.StatusInternalServerError)
			return
		}
		path += "?problem=" + key
	}
	http.Redirect(w, r, path, http.StatusSeeOther)
}

// flashes are messages kept for one page, by random key.
type flashes struct {
	mu sync.Mutex
	m  map[string]string
}

// maxFlashes bounds the messages kept: past it, the console starts anew.
const maxFlashes = 64

func (f *flashes) put(msg string) (string, error) {
	key, err := guard.NewToken()
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil || len(f.m) >= maxFlashes {
		f.m = map[string]string{}
	}
	f.m[key] = msg
	return key, nil
}

// take returns, and forgets, the message of key; "" for none.
func (f *flashes) take(key string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	msg := f.m[key]
	delete(f.m, key)
	return msg
}

// get reads an object the console shows; one of a namespace it does not
// show is not found.
func (s *server) get(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	if !s.inScope(key.Namespace) {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound,
			Reason: metav1.StatusReasonNotFound, Message: "namespace " + key.Namespace + " is not shown by this console"}}
	}
	return s.c.Get(ctx, key, obj)
}

// condition returns the status and message of a condition, "Unknown" when
// it is not there.
func condition(conds []metav1.Condition, kind string) (string, string) {
	if c := apimeta.FindStatusCondition(conds, kind); c != nil {
		return string(c.Status), c.Message
	}
	return string(metav1.ConditionUnknown), ""
}
