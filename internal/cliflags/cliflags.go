// Package cliflags is the command line's flag handling, in the conventions
// of kubectl and flux: a usage with examples and what the exit status
// means, a one-line hint naming the flag a typo meant, flags that may come
// between positional arguments, repeatable flags, and single-value flags
// that refuse a second value instead of keeping the last.
package cliflags

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Help is what a command's -h shows beside its flags.
type Help struct {
	// Synopsis is the command's form ("diff --base REF --head REF …").
	Synopsis string
	Examples []string
	// ExitStatus says what each exit status means ("0 …; 2 an error").
	ExitStatus string
}

// New is a command's flag set: -h prints its usage, a mistake prints the
// flag package's error and a hint (suggest names the flag a typo most
// likely meant, "" for none).
func New(program, name string, help Help, stderr io.Writer, suggest func(typo string, known []string) string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	out := &watchedWriter{w: stderr}
	fs.SetOutput(out)
	fs.Usage = func() {
		if out.last != "" {
			// The flag package has just said what is wrong: a hint, not
			// the whole usage.
			hint := ""
			if m := undefinedFlag.FindStringSubmatch(out.last); m != nil && suggest != nil {
				var known []string
				fs.VisitAll(func(f *flag.Flag) { known = append(known, f.Name) })
				if s := suggest(m[1], known); s != "" {
					hint = "Did you mean --" + s + "? "
				}
			}
			fmt.Fprintf(stderr, "%sRun '%s %s -h' for its flags and examples.\n", hint, program, name)
			return
		}
		fmt.Fprintf(stderr, "Usage: %s %s\n\nFlags:\n", program, help.Synopsis)
		fs.PrintDefaults()
		if len(help.Examples) > 0 {
			fmt.Fprintf(stderr, "\nExamples:\n")
			for _, e := range help.Examples {
				fmt.Fprintf(stderr, "  %s\n", e)
			}
		}
		fmt.Fprintf(stderr, "\nExit status: %s.\n", help.ExitStatus)
	}
	return fs
}

// Parse parses args, refusing a flag that takes one value given twice.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := once(fs, args); err != nil {
		return err
	}
	return fs.Parse(args)
}

// ParseInterspersed parses flags that may come before, between or after
// the positional arguments, and returns the positional ones.
func ParseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	if err := once(fs, args); err != nil {
		return nil, err
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// Multi is a repeatable flag: every value is kept, in order.
type Multi []string

func (m *Multi) String() string     { return strings.Join(*m, ",") }
func (m *Multi) Set(v string) error { *m = append(*m, v); return nil }

// once refuses a flag of fs that takes one value given twice in args: the
// last one would otherwise win without a word. Repeatable flags (Multi)
// take several. The refusal is said as the flag package says its own.
func once(fs *flag.FlagSet, args []string) error {
	seen := map[string]bool{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := fs.Lookup(name)
		if f == nil {
			continue // the flag package says what is wrong with it
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !hasValue && (!ok || !b.IsBoolFlag()) {
			i++ // its value
		}
		if _, multi := f.Value.(*Multi); multi {
			continue
		}
		if seen[f.Name] {
			err := fmt.Errorf("flag -%s given twice: it takes one value", f.Name)
			fmt.Fprintln(fs.Output(), err)
			fs.Usage()
			return err
		}
		seen[f.Name] = true
	}
	return nil
}

// undefinedFlag matches the flag package's error for a flag it does not know.
var undefinedFlag = regexp.MustCompile(`flag provided but not defined: -+(\S+)`)

// watchedWriter remembers the last thing written to it: the flag package
// writes its error just before it calls Usage.
type watchedWriter struct {
	w    io.Writer
	last string
}

func (w *watchedWriter) Write(p []byte) (int, error) {
	w.last = string(p)
	return w.w.Write(p)
}
