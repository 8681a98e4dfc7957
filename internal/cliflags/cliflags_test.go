package cliflags

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func testSet(out *bytes.Buffer) (*FlagSetValues, func(args ...string) error) {
	v := &FlagSetValues{}
	fs := New("prog", "cmd", Help{Synopsis: "cmd [flags]", Examples: []string{"prog cmd --name x"}, ExitStatus: "0 fine; 2 an error"}, out, nil)
	fs.StringVar(&v.name, "name", "anon", "a `NAME`")
	fs.BoolVar(&v.quiet, "quiet", false, "say less")
	fs.DurationVar(&v.wait, "wait", time.Second, "how long")
	fs.Func("level", "a level", func(string) error { v.levels++; return nil })
	fs.Var(&v.paths, "path", "repeatable")
	return v, func(args ...string) error {
		_, err := ParseInterspersed(fs, args)
		return err
	}
}

// FlagSetValues are what testSet's flags set.
type FlagSetValues struct {
	name   string
	quiet  bool
	wait   time.Duration
	levels int
	paths  Multi
}

// TestAFlagThatTakesOneValueRefusesASecond: every kind of single-value
// flag refuses a second value, in any spelling; a repeatable one keeps
// them all; a value that looks like a flag is a value.
func TestAFlagThatTakesOneValueRefusesASecond(t *testing.T) {
	for _, args := range [][]string{
		{"--name", "a", "--name", "b"}, {"-name=a", "pos", "--name=b"}, {"--quiet", "--quiet=false"},
		{"--wait", "1s", "-wait", "2s"}, {"--level", "a", "--level", "b"},
	} {
		var out bytes.Buffer
		_, parse := testSet(&out)
		if err := parse(args...); err == nil || !strings.Contains(out.String(), "given twice: it takes one value") || !strings.Contains(out.String(), "Run 'prog cmd -h'") {
			t.Errorf("%v: %v\n%s", args, err, out.String())
		}
	}
	var out bytes.Buffer
	v, parse := testSet(&out)
	if err := parse("--path", "a", "x", "--path", "b", "--name", "--quiet", "--quiet=false", "--", "--name"); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if strings.Join(v.paths, ",") != "a,b" || v.name != "--quiet" || v.quiet {
		t.Errorf("parsed %+v", v)
	}
}

// TestHelpShowsDefaultsExamplesAndExitStatus: -h prints every flag with
// its type and default, the examples and what the exit status means.
func TestHelpShowsDefaultsExamplesAndExitStatus(t *testing.T) {
	var out bytes.Buffer
	_, parse := testSet(&out)
	_ = parse("-h")
	for _, want := range []string{"Usage: prog cmd [flags]", "-name NAME", `(default "anon")`, "(default 1s)", "Examples:\n  prog cmd --name x", "Exit status: 0 fine; 2 an error."} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-h does not say %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "panic") {
		t.Errorf("-h:\n%s", out.String())
	}
}
