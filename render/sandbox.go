package render

import (
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/driftback/driftback/render/child"
	"github.com/driftback/driftback/render/childbin"
	"github.com/driftback/driftback/render/slots"
)

// job is one overlay waiting for a render child.
type job struct {
	overlay *Overlay
	closure *closure
	key     string
	build   BuildOptions
}

// run renders jobs in up to Parallelism children at once. krusty keeps global
// state and cannot run concurrently in one process, so parallelism is across
// processes, and each child renders its share one overlay after another.
func (r *Renderer) run(ctx context.Context, t *Tree, jobs []*job) error {
	if len(jobs) == 0 {
		return nil
	}
	n := min(r.opts.Parallelism, len(jobs))
	shares := make([][]*job, n)
	for i, j := range jobs {
		shares[i%n] = append(shares[i%n], j)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range shares {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.runShare(ctx, t, shares[i])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runShare renders jobs in a child, starting a fresh one after any overlay that
// killed its child, until every job has a result.
func (r *Renderer) runShare(ctx context.Context, t *Tree, jobs []*job) error {
	for len(jobs) > 0 {
		done, err := r.runChild(ctx, t, jobs)
		if err != nil {
			return err
		}
		jobs = jobs[done:]
	}
	return nil
}

// started is a started render child, its request on the way.
type started struct {
	cmd    *exec.Cmd
	stdout io.ReadCloser
	stderr *slots.Stderr
}

// startChild starts a render child for jobs renders and sends it req.
func (r *Renderer) startChild(jobs int, req *child.Request) (*started, error) {
	exe, found := "", false
	if !req.NeedsHelm() {
		exe, found = r.overlayChild()
	}
	ch, err := r.start(jobs, req, exe)
	if err != nil && found {
		// driftback-render beside it would not start (removed since, or
		// not for this machine): driftback renders instead.
		ch, err = r.start(jobs, req, "")
	}
	return ch, err
}

// overlayChild is the render child for overlays: KustomizeExecutable, else
// driftback-render beside the running binary (found), else "" for
// driftback's own.
func (r *Renderer) overlayChild() (exe string, found bool) {
	switch {
	case r.opts.KustomizeExecutable != "":
		return r.opts.KustomizeExecutable, false
	case r.opts.Executable != "":
		return "", false
	}
	exe = childbin.Find()
	return exe, exe != ""
}

// start starts the render child exe ("" for driftback's own) for jobs
// renders, and sends it req.
func (r *Renderer) start(jobs int, req *child.Request, exe string) (*started, error) {
	cmd, err := r.childCommand(jobs, exe)
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr := slots.NewStderr(4 << 10)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the render child: %w", err)
	}
	go func() {
		// A child that dies early closes the pipe; its exit status says why.
		_ = gob.NewEncoder(stdin).Encode(req)
		stdin.Close()
	}()
	return &started{cmd: cmd, stdout: stdout, stderr: stderr}, nil
}

// kill ends the child's process group; already gone is fine.
func (c *started) kill() { _ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL) }

// runChild starts one child for jobs and returns how many of them now have a
// result. A child that dies or overruns its time is blamed on the overlay it was
// rendering, which gets a problem saying why.
func (r *Renderer) runChild(ctx context.Context, t *Tree, jobs []*job) (int, error) {
	if err := r.slots.Acquire(ctx); err != nil {
		return 0, err
	}
	defer r.slots.Release()
	lim := r.opts.Limits
	req := child.Request{Files: map[string][]byte{}, MaxOutput: lim.MaxOutput, Origins: r.opts.Origins}
	for _, j := range jobs {
		req.Overlays = append(req.Overlays, j.overlay.Path)
		if j.build.LoadAnywhere || j.build.WithoutArgoCDHooks || j.build.EnableHelm {
			if req.Build == nil {
				req.Build = map[string]BuildOptions{}
			}
			req.Build[j.overlay.Path] = j.build
		}
		for _, f := range j.closure.files {
			if _, ok := req.Files[f]; ok {
				continue
			}
			b, err := t.ReadFile(f)
			if err != nil {
				return 0, err
			}
			req.Files[f] = b
		}
	}
	ch, err := r.startChild(len(jobs), &req)
	if err != nil {
		return 0, err
	}
	replies := make(chan child.Reply)
	readErr := make(chan error, 1)
	go func() {
		dec := gob.NewDecoder(ch.stdout)
		for {
			var rep child.Reply
			if err := dec.Decode(&rep); err != nil {
				readErr <- err
				return
			}
			replies <- rep
		}
	}()

	done := 0
	timer := time.NewTimer(lim.Timeout)
	defer timer.Stop()
	var blame *Problem
loop:
	for done < len(jobs) {
		select {
		case rep := <-replies:
			finish(t, jobs[done], rep)
			done++
			timer.Reset(lim.Timeout)
		case <-readErr:
			break loop
		case <-timer.C:
			ch.kill()
			blame = &Problem{Reason: ReasonLimit,
				Message: fmt.Sprintf("rendering took longer than the limit of %s", lim.Timeout)}
			break loop
		case <-ctx.Done():
			ch.kill()
			_ = ch.cmd.Wait() // reap; the context error is what matters
			return done, ctx.Err()
		}
	}
	if done == len(jobs) {
		_ = ch.stdout.Close() // the child exits on its own after the last reply
	}
	waitErr := ch.cmd.Wait()
	var exit *exec.ExitError
	if errors.As(waitErr, &exit) && exit.ExitCode() == child.ExitAfterPanic {
		// The child reported a panic and stepped down; a fresh one takes the rest.
		return done, nil
	}
	if done < len(jobs) {
		if blame == nil {
			blame = exitProblem(waitErr, ch.stderr.String(), lim)
		}
		blame.Overlay = jobs[done].overlay.Path
		blame.File = KustomizationFile(t, jobs[done].overlay.Path)
		jobs[done].overlay.Problems = []*Problem{blame}
		done++
	}
	return done, nil
}

// childCommand is the render child exe, confined, for jobs renders; ""
// is Executable, else the running binary.
func (r *Renderer) childCommand(jobs int, exe string) (*exec.Cmd, error) {
	lim := r.opts.Limits
	if exe == "" {
		exe = r.opts.Executable
	}
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("find the render child: %w", err)
		}
	}
	cpu := int(max(lim.CPU/time.Second, 1))
	cmd := exec.Command(exe)
	cmd.Env = []string{
		child.Env + "=1",
		child.EnvMemory + "=" + strconv.FormatInt(lim.Memory, 10),
		child.EnvCPU + "=" + strconv.Itoa(cpu),
		child.EnvTotal + "=" + strconv.Itoa(cpu*jobs+5),
		"PATH=", // no program can be found: git bases and exec plugins fail
		"GOMAXPROCS=1",
		"GOTRACEBACK=single",
	}
	cmd.Dir = "/"
	cmd.SysProcAttr = childProcAttr()
	return cmd, nil
}

// finish records a child's reply on its job, naming the file at fault when the
// message mentions one of the overlay's files.
func finish(t *Tree, j *job, rep child.Reply) {
	o := j.overlay
	if rep.Problem != nil {
		p := rep.Problem
		p.Overlay = o.Path
		if p.File == "" {
			p.File = blameFile(t, j.closure, p)
		}
		o.Problems = []*Problem{p}
		return
	}
	o.YAML = rep.YAML
	o.Origins = rep.Origins
	o.Hooks = rep.Hooks
}

// blameFile picks the file a kustomize message is about: for a plugin error the
// plugin config of the kind it names, else the last of the overlay's files the
// message names (kustomize wraps errors outside-in), else the overlay's own
// kustomization.
func blameFile(t *Tree, c *closure, p *Problem) string {
	if p.Reason == ReasonPlugin {
		if m := pluginKind.FindStringSubmatch(p.Message); m != nil {
			kind := regexp.MustCompile(`(?m)^kind:\s*` + regexp.QuoteMeta(m[1]) + `\s*$`)
			for _, f := range c.pluginFiles {
				if b, err := t.ReadFile(f); err == nil && kind.Match(b) {
					return f
				}
			}
		}
	}
	best, at := "", -1
	for _, f := range c.files {
		if i := strings.LastIndex(p.Message, f); i > at {
			best, at = f, i
		}
	}
	if best != "" {
		return best
	}
	return KustomizationFile(t, c.overlay)
}

var pluginKind = regexp.MustCompile(`plugin '([^']+)'`)

// exitProblem explains why a child died before answering.
func exitProblem(err error, stderr string, lim Limits) *Problem {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok {
			switch {
			case ws.Exited() && ws.ExitStatus() == child.ExitCPULimit,
				ws.Signaled() && (ws.Signal() == syscall.SIGXCPU || ws.Signal() == syscall.SIGKILL && strings.TrimSpace(stderr) == ""):
				return &Problem{Reason: ReasonLimit,
					Message: fmt.Sprintf("rendering used more than the CPU limit of %s", lim.CPU)}
			}
		}
	}
	if strings.Contains(stderr, "out of memory") || strings.Contains(stderr, "cannot allocate memory") ||
		strings.Contains(stderr, "failed to allocate") || // the race detector's allocator
		strings.Contains(stderr, "ThreadSanitizer") || // the race detector's shadow memory, past RLIMIT_DATA
		(firstLine(stderr) == "" && atMemoryLimit(err, lim)) {
		return &Problem{Reason: ReasonLimit,
			Message: fmt.Sprintf("rendering needed more than the memory limit of %d MiB (a YAML alias bomb does this)", lim.Memory>>20)}
	}
	if strings.Contains(stderr, "stack exceeds") {
		return &Problem{Reason: ReasonLimit, Message: "rendering recursed too deeply; the input is nested too deeply"}
	}
	msg := "the render child crashed"
	if err != nil {
		msg += " (" + err.Error() + ")"
	}
	if line := firstLine(stderr); line != "" {
		msg += ": " + line
	}
	return &Problem{Reason: ReasonPanic, Message: msg}
}

// atMemoryLimit says a child that died without saying why had reached
// its memory limit: its peak resident memory was at least three quarters
// of it (a crash there, its message lost, is the limit's).
func atMemoryLimit(err error, lim Limits) bool {
	var exit *exec.ExitError
	if lim.Memory <= 0 || !errors.As(err, &exit) {
		return false
	}
	ru, ok := exit.SysUsage().(*syscall.Rusage)
	if !ok {
		return false
	}
	peak := int64(ru.Maxrss)
	if runtime.GOOS == "linux" {
		peak *= 1024 // KiB there, bytes on darwin
	}
	return peak >= lim.Memory/4*3
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "fatal error") || strings.HasPrefix(l, "panic") || strings.Contains(l, "ERROR:") {
			return l
		}
	}
	return ""
}
