package config

import (
	"fmt"
	"sort"
	"strings"
)

// Error is every problem found in one config file. Its Error method prints
// one problem per line, so `clawgate check` can show them all at once.
type Error struct {
	// Problems are sorted by line; problems without a line come first.
	Problems []*Problem
}

// Problem is one error at one place in the file. Its text never contains a
// secret value: only the names of the variables or files that hold one.
type Problem struct {
	// File is the config file's name as given to Load or Parse.
	File string
	// Line is 1-based; 0 when the problem is not tied to a line.
	Line int
	// Field locates the problem, e.g. "dedupe.retention" or
	// "routes[0] (orders): timeout". Empty for problems with the whole file.
	Field string
	// Msg says what is wrong and, where it helps, how to fix it.
	Msg string
	// Err is the underlying error when the problem came from another
	// package (verify, dedupe, the file system); nil otherwise.
	Err error
}

// Error formats the problem as "FILE:LINE: FIELD: MSG" (the line and the
// field are left out when unknown).
func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Unwrap returns the underlying error, if any.
func (p *Problem) Unwrap() error { return p.Err }

// Error joins the problems, one per line.
func (e *Error) Error() string {
	return strings.Join(e.Lines(), "\n")
}

// Lines returns each problem formatted on its own.
func (e *Error) Lines() []string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Error()
	}
	return lines
}

// Unwrap returns the problems, so that errors.Is and errors.As see the
// errors they wrap.
func (e *Error) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// problems collects the problems of one file.
type problems struct {
	file string
	list []*Problem
}

// add records a problem.
func (ps *problems) add(line int, field, format string, args ...any) {
	ps.list = append(ps.list, &Problem{File: ps.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// wrap records a problem caused by err; msg is err's text.
func (ps *problems) wrap(line int, field string, err error) {
	ps.list = append(ps.list, &Problem{File: ps.file, Line: line, Field: field, Msg: err.Error(), Err: err})
}

// wrapTrim is wrap with the package prefix (such as "verify: ") removed
// from err's text, since the field already says where the problem is.
func (ps *problems) wrapTrim(line int, field, prefix string, err error) {
	ps.list = append(ps.list, &Problem{File: ps.file, Line: line, Field: field, Msg: strings.TrimPrefix(err.Error(), prefix), Err: err})
}

// err returns the collected problems as an *Error, or nil when there are none.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	list := append([]*Problem(nil), ps.list...)
	sort.SliceStable(list, func(i, j int) bool { return list[i].Line < list[j].Line })
	return &Error{Problems: list}
}
