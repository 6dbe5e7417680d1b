// Package ui is `kubectl skills ui`: a local web console for the people who
// approve and operate. It runs on the person's machine, like kubectl proxy,
// and every read and write it makes is the person's own API request, with
// their kubeconfig: RBAC and the operator's admission policies judge it
// exactly as they judge kubectl. Nothing runs in the cluster for it.
//
// The console listens on 127.0.0.1 only, behind package guard (Host and
// Origin checks, a per-start token, a CSRF token, a strict
// Content-Security-Policy). What it shows comes from people and programs
// it does not trust (skills, agents, command output), so it is rendered by
// package render, and the pages are html/template's, which escape the rest.
package ui

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeskills/kubeskills/internal/cli/approval"
	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
	"github.com/kubeskills/kubeskills/internal/cli/ui/guard"
)

const long = `Start a web console for approving commands and seeing what agents do.

The console runs on this machine, on 127.0.0.1, and uses your kubeconfig:
every page is read, and every approval written, as you, so the API server's
RBAC and the operator's admission policies judge it as they judge kubectl.
Nothing is installed in the cluster, and there is no second login.

Its pages:
  /            the approvals inbox: every run waiting for a person, live,
               with what 'kubectl skills approve' shows, and Approve and
               Deny (each with a reason)
  /runs        runs by agent, phase and age; a run's page has its command,
               decision, approvals, output and a timeline of its life
  /skills      the catalog, each skill's SKILL.md rendered, its files, and
               why it was refused, if it was
  /agents/...  an agent's status, catalog and policy, and a chat with it
               (through a port-forward made as you)
  /policies/...a policy's rules, and a box to try a command against it

The URL it prints holds a random token, good until the console stops; open
it in your browser (the console opens it for you unless --no-browser).
Stop the console with Ctrl-C.`

const example = `  # The inbox of the namespace agents
  kubectl skills ui -n agents

  # Every namespace you may read, on a fixed port, without opening a browser
  kubectl skills ui -A --port 8484 --no-browser`

// options are the flags of ui.
type options struct {
	*cmdline.Options
	port          int
	allNamespaces bool
	noBrowser     bool
}

// NewCommand returns `kubectl skills ui`.
func NewCommand(o *cmdline.Options) *cobra.Command {
	opts := &options{Options: o}
	cmd := &cobra.Command{
		Use:     "ui [--port PORT] [-A]",
		Short:   "Start a local web console to approve commands and see runs, skills and agents, as yourself",
		Long:    long,
		Example: example,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return opts.run(cmd.Context())
		},
	}
	cmd.Flags().IntVar(&opts.port, "port", 0, "Port on 127.0.0.1 to listen on; 0 picks a free one")
	cmd.Flags().BoolVarP(&opts.allNamespaces, "all-namespaces", "A", false, "Show every namespace you may read, not only -n's")
	cmd.Flags().BoolVar(&opts.noBrowser, "no-browser", false, "Print the URL without opening a browser")
	return cmd
}

// run serves the console until ctx is done.
func (o *options) run(ctx context.Context) error {
	ns := ""
	if !o.allNamespaces {
		var err error
		if ns, err = o.Namespace(); err != nil {
			return err
		}
	}
	cfg, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("failed to load kubeconfig: %w", err)
	}
	user, err := approval.CurrentUser(ctx, o.ConfigFlags)
	if err != nil {
		return err
	}
	c, err := o.WatchClient()
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", fmt.Sprint(o.port)))
	if err != nil {
		return fmt.Errorf("failed to listen on 127.0.0.1:%d: %w", o.port, err)
	}
	g, err := guard.New(l.Addr().(*net.TCPAddr).Port)
	if err != nil {
		_ = l.Close()
		return err
	}
	s, err := newServer(cfg, c, user, ns, g)
	if err != nil {
		_ = l.Close()
		return err
	}
	srv := &http.Server{Handler: g.Wrap(s.routes()), ReadHeaderTimeout: 10 * time.Second}
	where := "namespace " + ns
	if ns == "" {
		where = "every namespace"
	}
	url := g.URL("/")
	_, _ = fmt.Fprintf(o.Streams.Out, "Serving the kubeskills console for %s, as %s, at\n  %s\n", where, cmdline.Printable(user), url)
	if !o.noBrowser {
		if err := openBrowser(url); err != nil {
			_, _ = fmt.Fprintf(o.Streams.ErrOut, "Open that URL in a browser: %v\n", err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.close()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// openBrowser opens url in the person's browser.
func openBrowser(url string) error {
	name, args := "xdg-open", []string{url}
	switch runtime.GOOS {
	case "darwin":
		name = "open"
	case "windows":
		name, args = "rundll32", []string{"url.dll,FileProtocolHandler", url}
	}
	cmd := exec.Command(name, args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
