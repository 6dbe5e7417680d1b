package controller

import (
	"context"
	"time"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// History exposes history to the package's external tests: how many
// finished runs, and for how long, the run's policy keeps.
func History(r *CommandRunReconciler, ctx context.Context, run *skillsv1.CommandRun) (int, time.Duration, error) {
	return r.history(ctx, run)
}

// StartedPrograms and ProgramsClause expose to the package's external
// tests what a decision records of the programs that can start others, and
// the AwaitingApproval Event's clause on them.
var (
	StartedPrograms = startedPrograms
	ProgramsClause  = programsClause
)
