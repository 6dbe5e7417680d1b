package policy

import (
	"reflect"
	"strings"
	"sync"
	"testing"
)

// cloneDecision copies a decision down to its strings, so that a later
// change to memory it shares would show.
func cloneDecision(d Decision) Decision {
	c := d
	c.Reason = strings.Clone(d.Reason)
	c.Parts = nil
	for _, p := range d.Parts {
		p.Command, p.Reason = strings.Clone(p.Command), strings.Clone(p.Reason)
		c.Parts = append(c.Parts, p)
	}
	return c
}

// TestDecisionsShareNothing checks that the scratch space a Matcher reuses
// between decisions never leaks from one decision into another: decisions
// made at once by many goroutines, on commands of every kind (those with
// more than 1,024 parts drop their scratch space, the others keep it), equal those made
// one at a time by a Matcher of their own, and a decision already returned
// does not change while later ones are made.
func TestDecisionsShareNothing(t *testing.T) {
	var commands []string
	for _, tc := range decideTable() {
		// The longest rows would only make the test slow; `ls;` 1,100
		// times stays, which grows the scratch space beyond what is kept.
		if len(tc.command) <= 4<<10 {
			commands = append(commands, tc.command)
		}
	}
	for _, c := range adversarial(2 << 10) {
		commands = append(commands, c)
	}
	commands = append(commands, pipeline1KiB(), "", "ls\x01", "sh -c 'sh -c \"rm -rf /\"' | grep x")
	tools := []string{"Bash(ls *)", "git"}
	want := func(m *Matcher, c string) [3]Decision {
		return [3]Decision{m.Decide(c), m.DecideFor(c, tools), m.DecideArgs(strings.Fields(c), tools)}
	}
	alone, err := Compile(realisticPolicy())
	if err != nil {
		t.Fatal(err)
	}
	expected := make([][3]Decision, len(commands))
	for i, c := range commands {
		expected[i] = want(alone, c)
	}
	kept := cloneDecision(expected[0][0])
	shared, err := Compile(realisticPolicy())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for round := range 2 {
				for k := range commands {
					// Each goroutine takes the commands in another order.
					i := (k*(2*g+1) + round) % len(commands)
					if got := want(shared, commands[i]); !reflect.DeepEqual(got, expected[i]) {
						t.Errorf("decisions on %q made at once differ from those made alone:\n%+v\nwant\n%+v", short(commands[i]), got, expected[i])
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if !reflect.DeepEqual(expected[0][0], kept) {
		t.Errorf("a decision changed after it was returned:\n%+v\nwas\n%+v", expected[0][0], kept)
	}
}
