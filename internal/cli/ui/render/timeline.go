package render

import (
	"fmt"
	"math"
	"time"
)

// Step is one moment of a run's life: filed, judged, approved, and so on.
type Step struct {
	Name string
	At   time.Time
}

// Mark is a step placed on the timeline's picture.
type Mark struct {
	// X is the step's place, in the picture's units.
	X float64
	// Name is the step; At its time (UTC, to the millisecond); Since the
	// time from the step before ("" for the first).
	Name, At, Since string
	// Above tells whether its label goes above the line, so that labels of
	// steps close together do not overlap.
	Above bool
}

// Timeline is a run's life drawn as a line with a mark per step.
type Timeline struct {
	// Width and Height are the picture's size; Y is the line's height in it.
	Width, Height, Y float64
	Marks            []Mark
	// Total is the time from the first step to the last.
	Total string
}

// Picture sizes: marks are at least minGap apart; the rest of the width
// is shared by the gaps in proportion to the logarithm of their durations,
// so that a wait of minutes and a step of milliseconds both show.
const (
	timelineWidth  = 900.0
	timelineHeight = 110.0
	timelineMargin = 60.0
	minGap         = 40.0
)

// DrawTimeline places steps, in the order given, on a picture. Steps whose
// time is unknown (zero) are left out.
func DrawTimeline(steps []Step) Timeline {
	var known []Step
	for _, s := range steps {
		if !s.At.IsZero() {
			known = append(known, s)
		}
	}
	t := Timeline{Width: timelineWidth, Height: timelineHeight, Y: timelineHeight / 2}
	if len(known) == 0 {
		return t
	}
	weights := make([]float64, len(known))
	sum := 0.0
	for i := 1; i < len(known); i++ {
		d := known[i].At.Sub(known[i-1].At)
		weights[i] = math.Log1p(math.Max(float64(d.Milliseconds()), 0))
		sum += weights[i]
	}
	span := timelineWidth - 2*timelineMargin
	spare := span - minGap*float64(len(known)-1)
	x := timelineMargin
	for i, s := range known {
		if i > 0 {
			x += minGap
			if sum > 0 {
				x += spare * weights[i] / sum
			}
		}
		m := Mark{X: math.Round(x*10) / 10, Name: s.Name, At: s.At.UTC().Format("15:04:05.000"), Above: i%2 == 0}
		if i > 0 {
			m.Since = "+" + Duration(s.At.Sub(known[i-1].At))
		}
		t.Marks = append(t.Marks, m)
	}
	if len(known) > 1 {
		t.Total = Duration(known[len(known)-1].At.Sub(known[0].At))
	}
	return t
}

// Duration says how long d is, to a precision that fits it: 850ms, 3.2s,
// 4m05s, 2h10m.
func Duration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + Duration(-d)
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", d/time.Minute, (d%time.Minute)/time.Second)
	}
	d = d.Round(time.Minute)
	return fmt.Sprintf("%dh%02dm", d/time.Hour, (d%time.Hour)/time.Minute)
}
