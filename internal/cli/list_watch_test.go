package cli_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli"
	"github.com/kubeskills/kubeskills/internal/cli/clitest"
	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

// api is the real API server of the package's tests, started by the first
// test that asks for it.
var api testenv.Lazy

func TestMain(m *testing.M) {
	code := m.Run()
	if err := api.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "failed to stop the control plane:", err)
	}
	os.Exit(code)
}

// pageCap is the most runs the test's API server returns in one page.
const pageCap = 2

// unreliableServer is a client of the test API server that does, when the
// test says so, what a real server does now and then: it ends a watch,
// and it refuses to resume one from a resourceVersion it no longer has
// (410 Gone, sent as an event of the watch). It returns at most pageCap
// runs a page, as a server may, so that listing must follow continue
// tokens.
type unreliableServer struct {
	client.WithWatch

	mu sync.Mutex
	// pages are the list requests of runs, one a page.
	pages []client.ListOptions
	// current is the watch open now, nil when none is.
	current watch.Interface
	// held, while not nil, keeps new watches waiting until it is closed.
	held chan struct{}
	// expire makes the next watch answer 410 Gone.
	expire bool
}

func (s *unreliableServer) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, runs := list.(*skillsv1.CommandRunList); runs {
		asked := (&client.ListOptions{}).ApplyOptions(opts)
		s.mu.Lock()
		s.pages = append(s.pages, *asked)
		s.mu.Unlock()
		if asked.Limit == 0 || asked.Limit > pageCap {
			opts = append(opts, client.Limit(pageCap))
		}
	}
	return s.WithWatch.List(ctx, list, opts...)
}

func (s *unreliableServer) Watch(ctx context.Context, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
	s.mu.Lock()
	held := s.held
	s.mu.Unlock()
	if held != nil {
		select {
		case <-held:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.expire {
		s.expire = false
		events := make(chan watch.Event, 1)
		events <- watch.Event{Type: watch.Error, Object: &apierrors.NewResourceExpired("too old resource version").ErrStatus}
		return watch.NewProxyWatcher(events), nil
	}
	w, err := s.WithWatch.Watch(ctx, list, opts...)
	s.current = w
	return w, err
}

// interrupt ends the open watch and keeps the next one waiting until the
// function it returns is called; with expire, that watch then answers
// 410 Gone instead of resuming.
func (s *unreliableServer) interrupt(t *testing.T, expire bool) (resume func()) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current == nil {
		t.Fatal("no watch is open")
	}
	held := make(chan struct{})
	s.held = held
	s.current.Stop()
	s.current = nil
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.expire = expire
		s.held = nil
		close(held)
	}
}

// watching tells whether a watch is open.
func (s *unreliableServer) watching() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current == nil {
		return errors.New("no watch is open")
	}
	return nil
}

// pagesFollowed checks that the runs were listed in pages since the page
// request from: a first page that asked for a limit, then one that gave
// the continue token.
func (s *unreliableServer) pagesFollowed(from int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	pages := s.pages[from:]
	if len(pages) < 2 || pages[0].Limit == 0 || pages[0].Continue != "" || pages[1].Continue == "" {
		return fmt.Errorf("list requests %+v are not pages", pages)
	}
	return nil
}

// pageCount is how many pages of runs were asked for.
func (s *unreliableServer) pageCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pages)
}

// TestListPagesAndWatchResumes runs list and list --pending --watch
// against a real API server whose answers come in small pages and whose
// watches end or expire: the table is complete, and the watch loses no
// change across either.
func TestListPagesAndWatchResumes(t *testing.T) {
	env := api.Get(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	server := &unreliableServer{WithWatch: c}
	g := gomega.NewWithT(t)
	eventually := func(what string, f func() error) {
		t.Helper()
		g.Eventually(f, 20*time.Second, 50*time.Millisecond).Should(gomega.Succeed(), what)
	}
	newRun := func(name string, phase skillsv1.RunPhase) {
		t.Helper()
		run := &skillsv1.CommandRun{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       skillsv1.CommandRunSpec{Agent: "ops", Command: "kubectl rollout restart deploy/" + name},
		}
		if err := c.Create(ctx, run); err != nil {
			t.Fatal(err)
		}
		setPhase(t, c, run, phase)
	}
	deleteRun := func(name string) {
		t.Helper()
		if err := c.Delete(ctx, &skillsv1.CommandRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"first", "second"} {
		newRun(name, skillsv1.PhaseAwaitingApproval)
	}
	newRun("running", skillsv1.PhaseRunning)

	options := func(out, errOut *clitest.SyncBuffer) *cmdline.Options {
		o := cmdline.NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut})
		o.NewClient = func(*genericclioptions.ConfigFlags) (client.WithWatch, error) { return server, nil }
		return o
	}
	var out, errOut clitest.SyncBuffer
	cmd := cli.NewRootCommand(options(&out, &errOut))
	cmd.SetArgs([]string{"list", "-n", ns})
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("list: %v: %s", err, errOut.String())
	}
	for _, name := range []string{"first", "second", "running"} {
		if !strings.Contains(out.String(), "\n"+name+" ") {
			t.Errorf("list lacks %s:\n%s", name, out.String())
		}
	}
	if err := server.pagesFollowed(0); err != nil {
		t.Error(err)
	}

	watchCtx, cancel := context.WithCancel(ctx)
	var watchOut, watchErrOut clitest.SyncBuffer
	cmd = cli.NewRootCommand(options(&watchOut, &watchErrOut))
	cmd.SetArgs([]string{"list", "--pending", "--watch", "-n", ns})
	done := make(chan error)
	pages := server.pageCount()
	go func() { done <- cmd.ExecuteContext(watchCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("list --watch: %v: %s", err, watchErrOut.String())
		}
	}()
	rowFor := func(name, phase string) func() error {
		return func() error {
			for _, l := range strings.Split(watchOut.String(), "\n") {
				if f := strings.Fields(l); len(f) > 0 && f[0] == name && f[len(f)-1] == phase {
					return nil
				}
			}
			return fmt.Errorf("no %s row of %s in:\n%s%s", phase, name, watchOut.String(), watchErrOut.String())
		}
	}
	eventually("the table", rowFor("second", "AwaitingApproval"))
	if err := rowFor("first", "AwaitingApproval")(); err != nil {
		t.Error(err)
	}
	if err := server.pagesFollowed(pages); err != nil {
		t.Error(err)
	}
	eventually("the watch", server.watching)

	// The server ends the watch; what changes before the next one starts
	// comes with it, from the last resourceVersion seen.
	resume := server.interrupt(t, false)
	newRun("third", skillsv1.PhaseAwaitingApproval)
	deleteRun("first")
	resume()
	eventually("the run that came while no watch was open", rowFor("third", "AwaitingApproval"))
	eventually("the run deleted while no watch was open", rowFor("first", "Deleted"))

	// The server no longer has that resourceVersion: the follower lists
	// again, in pages, and tells what changed in between.
	eventually("the watch again", server.watching)
	resume = server.interrupt(t, true)
	pages = server.pageCount()
	newRun("fourth", skillsv1.PhaseAwaitingApproval)
	deleteRun("second")
	setPhase(t, c, &skillsv1.CommandRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "third"}}, skillsv1.PhaseDenied)
	resume()
	eventually("the run that came before the list", rowFor("fourth", "AwaitingApproval"))
	eventually("the run deleted before the list", rowFor("second", "Deleted"))
	eventually("the run denied before the list", rowFor("third", "Denied"))
	if err := server.pagesFollowed(pages); err != nil {
		t.Error(err)
	}

	// And it watches on from the new list.
	newRun("fifth", skillsv1.PhaseAwaitingApproval)
	eventually("the run that came after the list", rowFor("fifth", "AwaitingApproval"))
	if lines := strings.Count(watchOut.String(), "\n"); lines != 9 {
		t.Errorf("want the header and 8 rows, a row for each change:\n%s", watchOut.String())
	}
}

// TestListWatchForbidden: a person who may list runs but not watch them
// gets the list, then one line that names the right to ask for.
func TestListWatchForbidden(t *testing.T) {
	env := api.Get(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	objects := []client.Object{
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "list-runs"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{skillsv1.GroupVersion.Group}, Resources: []string{"commandruns"},
				Verbs: []string{"list"}}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dave-lists-runs"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "list-runs"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "dave"}},
		},
	}
	for _, obj := range objects {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig, err := env.UserKubeconfig("dave")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	res := clitest.Run("", "list", "--pending", "--watch", "-n", ns, "--kubeconfig", path)
	want := "error: failed to watch CommandRuns in namespace \"" + ns + "\": forbidden: you need watch on commandruns"
	if res.Code != cli.ExitFailed || !strings.HasPrefix(res.Stdout, "NAME ") ||
		!strings.Contains(res.Stderr, want) || strings.Count(res.Stderr, "\n") != 2 {
		t.Errorf("exit %d, stdout %q, stderr %q; want the table, then %q", res.Code, res.Stdout, res.Stderr, want)
	}
}

// setPhase sets a run's status.phase, as the operator would.
func setPhase(t *testing.T, c client.Client, run *skillsv1.CommandRun, phase skillsv1.RunPhase) {
	t.Helper()
	ctx := context.Background()
	if err := c.Get(ctx, client.ObjectKeyFromObject(run), run); err != nil {
		t.Fatal(err)
	}
	run.Status.Phase = phase
	if err := c.Status().Update(ctx, run); err != nil {
		t.Fatal(err)
	}
}
