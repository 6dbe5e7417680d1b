package policy

// partBuilder collects the constructs of one part; the first one found is
// the one a reason names.
type partBuilder struct {
	reason string
	// bash is the first bash-only construct. It is named only when no
	// other construct was found, which says more.
	bash string
	// never is set by a construct that refuses the part whatever the
	// rules say (a NUL byte).
	never string
	// forms are the forms of the command that hide what it acts on (kubectl
	// -f): an Always verdict stands only when its rule names each of them.
	forms []hiddenForm
}

// hiddenForm is a form of a command whose words do not show what it acts
// on; a rule allows it without a person only by naming one of its
// spellings (see namesForm).
type hiddenForm struct {
	spellings []string
	why       string
}

// hide records a form that an Always rule must name.
func (pb *partBuilder) hide(f hiddenForm) {
	for _, g := range pb.forms {
		if g.why == f.why {
			return
		}
	}
	pb.forms = append(pb.forms, f)
}

// variant is the words of a command as the program reads them, when they
// differ from the words as written, and what the reason says of them.
type variant struct {
	words []cword
	note  string
}

// add records a construct.
func (pb *partBuilder) add(reason string) {
	if pb.reason == "" {
		pb.reason = reason
	}
}

// addBash records bash-only syntax; what names it.
func (pb *partBuilder) addBash(what string) {
	if pb.bash == "" {
		pb.bash = bashOnly(what)
	}
}

// addBashReason records bash-only syntax with a reason worded by bashOnly
// beforehand, so that the common constructs cost no allocation.
func (pb *partBuilder) addBashReason(reason string) {
	if pb.bash == "" {
		pb.bash = reason
	}
}

// why returns the reason the part is a construct, or "".
func (pb *partBuilder) why() string {
	if pb.reason != "" {
		return pb.reason
	}
	return pb.bash
}

// refuse records a construct that makes the part Never.
func (pb *partBuilder) refuse(reason string) {
	if pb.never == "" {
		pb.never = reason
	}
}

// verdict is what the rules say about one simple command.
type verdict struct {
	action Action
	// index is the deciding rule, -1 for the default action.
	index int
	// possible is set when the rule matches only for some values of the
	// command's expansions.
	possible bool
	// base is the base name the rule matched, when it did not match the
	// command name as written.
	base string
	// note is set when the rule matched the words as the command reads
	// them (kubectl's resource names, the verb a flag implies, a file read
	// through a redirection), not as written; it ends the explanation.
	note string
}
