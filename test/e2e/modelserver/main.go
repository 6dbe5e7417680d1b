// Command modelserver is the scripted OpenAI-compatible model the
// end-to-end tests run in a pod (image docker.io/kubeskills/modelserver:dev):
// the server of internal/agent/modeltest as a process.
//
//	modelserver [-addr :8080] [-starts-addr :8081] [-steps FILE [-loop]]
//
// It serves the chat completions API at /v1, GET /healthz, and the admin
// API under /admin/ through which a test appends steps, reads the recorded
// requests and resets the script (see modeltest.Admin). -steps loads a first
// script, a JSON array of steps; -loop plays it again each time it runs out.
// -starts-addr also serves the start counter of the chaos tests (see
// starts). It stops on SIGTERM or SIGINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
)

func main() {
	addr := flag.String("addr", ":8080", "address to listen on")
	stepsFile := flag.String("steps", "", "a JSON file holding an array of steps to play first")
	loop := flag.Bool("loop", false, "play the script again from its start when it runs out")
	startsAddr := flag.String("starts-addr", "", "address to serve the start counter on; empty: none")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: modelserver [-addr :8080] [-starts-addr :8081] [-steps FILE [-loop]]")
		os.Exit(2)
	}
	if err := run(*addr, *startsAddr, *stepsFile, *loop); err != nil {
		fmt.Fprintln(os.Stderr, "modelserver:", err)
		os.Exit(1)
	}
}

func run(addr, startsAddr, stepsFile string, loop bool) error {
	var steps []modeltest.Step
	if stepsFile != "" {
		var err error
		if steps, err = modeltest.LoadSteps(stepsFile); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if startsAddr != "" {
		errc := make(chan error, 1)
		go func() { errc <- serveStarts(ctx, startsAddr) }()
		defer func() {
			stop()
			if err := <-errc; err != nil {
				fmt.Fprintln(os.Stderr, "modelserver:", err)
			}
		}()
	}
	return modeltest.Serve(ctx, addr, steps, func(s *modeltest.Server, a net.Addr) {
		if loop {
			s.Loop()
		}
		fmt.Printf("modelserver: serving a script of %d steps on %s\n", len(steps), a)
	})
}
