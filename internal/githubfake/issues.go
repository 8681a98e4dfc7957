package githubfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Issue is an issue (not a pull request).
type Issue struct {
	Number int
	Title  string
	Body   string
	User   string
	State  string
	Labels []string
}

// nextNumber is the repository's next issue or pull-request number.
func (r *Repo) nextNumber() int {
	n := 0
	for k := range r.Pulls {
		n = max(n, k)
	}
	for k := range r.Issues {
		n = max(n, k)
	}
	return n + 1
}

func (r *Repo) labelsOf(n int) []string {
	if p, ok := r.Pulls[n]; ok {
		return p.Labels
	}
	if i, ok := r.Issues[n]; ok {
		return i.Labels
	}
	return nil
}

// Pulls returns a repository's pull requests by number.
func (f *Fake) Pulls(repo string) []Pull {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Pull
	for _, p := range f.repos[repo].Pulls {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out
}

// Issues returns a repository's issues (not pull requests) by number.
func (f *Fake) Issues(repo string) []Issue {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Issue
	for _, i := range f.repos[repo].Issues {
		out = append(out, *i)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out
}

// ClosePull closes a pull request as a person would, merged or not.
func (f *Fake) ClosePull(repo string, number int, merged bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.repos[repo].Pulls[number]
	p.State, p.Merged = "closed", merged
}

func (f *Fake) repoInstallation(w http.ResponseWriter, _ *http.Request, m []string, _ int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.repos[m[1]+"/"+m[2]]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": r.Installation, "app_id": f.AppID,
		"account": map[string]any{"login": r.Owner}, "repository_selection": "selected"})
}

func validation(w http.ResponseWriter, resource, field, message string) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed",
		"errors": []map[string]any{{"resource": resource, "field": field, "code": "custom", "message": message}}})
}

// pullsWithCommit lists the pull requests that carried a commit.
func (f *Fake) pullsWithCommit(w http.ResponseWriter, _ *http.Request, m []string, inst int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repo(w, m[1], m[2], inst)
	if r == nil {
		return
	}
	var list []*Pull
	for _, p := range r.Pulls {
		if p.HeadSHA == m[3] || slices.Contains(p.Commits, m[3]) {
			list = append(list, p)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Number < list[j].Number })
	out := []map[string]any{}
	for _, p := range list {
		out = append(out, f.pullJSON(r, p))
	}
	writeJSON(w, http.StatusOK, out)
}

// listPulls answers with state (open, closed, all) and head (owner:branch)
// filters, newest first, as GitHub does.
func (f *Fake) listPulls(w http.ResponseWriter, req *http.Request, m []string, inst int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repo(w, m[1], m[2], inst)
	if r == nil {
		return
	}
	q := req.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	var list []*Pull
	for _, p := range r.Pulls {
		if state != "all" && p.State != state {
			continue
		}
		if h := q.Get("head"); h != "" {
			owner, branch, ok := strings.Cut(h, ":")
			headRepo := p.HeadRepo
			if headRepo == "" {
				headRepo = r.Owner + "/" + r.Name
			}
			if !ok || p.HeadRef != branch || !strings.EqualFold(strings.Split(headRepo, "/")[0], owner) {
				continue
			}
		}
		list = append(list, p)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Number > list[j].Number })
	out := []map[string]any{}
	for _, p := range list {
		out = append(out, f.pullJSON(r, p))
	}
	writeJSON(w, http.StatusOK, out)
}

func (f *Fake) createPull(w http.ResponseWriter, req *http.Request, m []string, inst int64) {
	var in struct {
		Title, Head, Base, Body string
		Draft                   bool
	}
	if !readJSON(w, req, &in) || tooLong(w, in.Body) {
		return
	}
	branch := in.Head
	if _, b, ok := strings.Cut(in.Head, ":"); ok {
		branch = b
	}
	if in.Title == "" || in.Base == "" || branch == "" {
		validation(w, "PullRequest", "head", "title, head and base are required")
		return
	}
	// Asked before locking: the hook may call back into the fake.
	sha := ""
	if f.BranchHead != nil {
		var ok bool
		if sha, ok = f.BranchHead(m[1]+"/"+m[2], branch); !ok {
			validation(w, "PullRequest", "head", "head invalid")
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repo(w, m[1], m[2], inst)
	if r == nil {
		return
	}
	for _, p := range r.Pulls {
		if p.State == "open" && p.HeadRef == branch && p.BaseRef == in.Base && p.HeadRepo == "" {
			validation(w, "PullRequest", "", fmt.Sprintf("A pull request already exists for %s:%s.", r.Owner, branch))
			return
		}
	}
	p := &Pull{Number: r.nextNumber(), Title: in.Title, Body: in.Body, User: f.botLogin(), HeadRef: branch,
		HeadSHA: sha, BaseRef: in.Base, Draft: in.Draft, State: "open"}
	r.Pulls[p.Number] = p
	writeJSON(w, http.StatusCreated, f.pullJSON(r, p))
}

// edit is the body of a PATCH to an issue or pull request: the fields given
// change, the others stay.
type edit struct {
	Title, Body, State *string
}

func readEdit(w http.ResponseWriter, req *http.Request) (edit, bool) {
	var in edit
	if !readJSON(w, req, &in) {
		return in, false
	}
	if in.Body != nil && tooLong(w, *in.Body) {
		return in, false
	}
	return in, true
}

func (e edit) apply(title, body, state *string) {
	for _, f := range []struct{ from, to *string }{{e.Title, title}, {e.Body, body}, {e.State, state}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
}

func (f *Fake) editPull(w http.ResponseWriter, req *http.Request, m []string, inst int64) {
	in, ok := readEdit(w, req)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r, p := f.pull(w, m, inst)
	if p == nil {
		return
	}
	if in.State != nil && *in.State == "open" && p.Merged {
		validation(w, "PullRequest", "state", "cannot reopen a merged pull request")
		return
	}
	in.apply(&p.Title, &p.Body, &p.State)
	writeJSON(w, http.StatusOK, f.pullJSON(r, p))
}

func (f *Fake) issueJSON(r *Repo, i *Issue) map[string]any {
	labels := []map[string]any{}
	for _, l := range i.Labels {
		labels = append(labels, map[string]any{"name": l})
	}
	return map[string]any{
		"number": i.Number, "title": i.Title, "body": i.Body, "state": i.State,
		"user": map[string]any{"login": i.User, "type": userType(i.User)}, "labels": labels,
		"html_url": fmt.Sprintf("%s/%s/%s/issues/%d", f.Server.URL, r.Owner, r.Name, i.Number),
	}
}

// listIssues answers with state, creator and labels filters; like GitHub's,
// the list holds pull requests too, marked with a pull_request key.
func (f *Fake) listIssues(w http.ResponseWriter, req *http.Request, m []string, inst int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repo(w, m[1], m[2], inst)
	if r == nil {
		return
	}
	q := req.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	var want []string
	if l := q.Get("labels"); l != "" {
		want = strings.Split(l, ",")
	}
	keep := func(st, user string, labels []string) bool {
		if state != "all" && st != state {
			return false
		}
		if c := q.Get("creator"); c != "" && c != user {
			return false
		}
		for _, l := range want {
			found := false
			for _, x := range labels {
				found = found || x == l
			}
			if !found {
				return false
			}
		}
		return true
	}
	var numbers []int
	out := map[int]map[string]any{}
	for n, i := range r.Issues {
		if keep(i.State, i.User, i.Labels) {
			numbers = append(numbers, n)
			out[n] = f.issueJSON(r, i)
		}
	}
	for n, p := range r.Pulls {
		if keep(p.State, p.User, p.Labels) {
			numbers = append(numbers, n)
			j := f.issueJSON(r, &Issue{Number: p.Number, Title: p.Title, Body: p.Body, User: p.User, State: p.State, Labels: p.Labels})
			j["pull_request"] = map[string]any{"url": fmt.Sprintf("%s/repos/%s/%s/pulls/%d", f.Server.URL, r.Owner, r.Name, n)}
			out[n] = j
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(numbers)))
	list := []map[string]any{}
	for _, n := range numbers {
		list = append(list, out[n])
	}
	writeJSON(w, http.StatusOK, list)
}

func (f *Fake) createIssue(w http.ResponseWriter, req *http.Request, m []string, inst int64) {
	var in struct {
		Title, Body string
		Labels      []string
	}
	b, err := io.ReadAll(req.Body)
	if err == nil {
		err = json.Unmarshal(b, &in)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON"})
		return
	}
	if tooLong(w, in.Body) {
		return
	}
	// As GitHub: "labels" is an array when it is sent at all.
	var raw map[string]json.RawMessage
	if json.Unmarshal(b, &raw) == nil && string(raw["labels"]) == "null" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Invalid request.\n\nFor 'properties/labels', nil is not an array."})
		return
	}
	labels := in.Labels
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repo(w, m[1], m[2], inst)
	if r == nil {
		return
	}
	if in.Title == "" {
		validation(w, "Issue", "title", "title is required")
		return
	}
	i := &Issue{Number: r.nextNumber(), Title: in.Title, Body: in.Body, User: f.botLogin(), State: "open", Labels: labels}
	r.Issues[i.Number] = i
	writeJSON(w, http.StatusCreated, f.issueJSON(r, i))
}

// getIssue answers for an issue, or a pull request as an issue, as GitHub
// does.
func (f *Fake) getIssue(w http.ResponseWriter, _ *http.Request, m []string, inst int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repo(w, m[1], m[2], inst)
	if r == nil {
		return
	}
	n, _ := strconv.Atoi(m[3])
	if i, ok := r.Issues[n]; ok {
		writeJSON(w, http.StatusOK, f.issueJSON(r, i))
		return
	}
	if p, ok := r.Pulls[n]; ok {
		j := f.issueJSON(r, &Issue{Number: p.Number, Title: p.Title, Body: p.Body, User: p.User, State: p.State, Labels: p.Labels})
		j["pull_request"] = map[string]any{"url": fmt.Sprintf("%s/repos/%s/%s/pulls/%d", f.Server.URL, r.Owner, r.Name, n)}
		writeJSON(w, http.StatusOK, j)
		return
	}
	writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
}

func (f *Fake) editIssue(w http.ResponseWriter, req *http.Request, m []string, inst int64) {
	in, ok := readEdit(w, req)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repo(w, m[1], m[2], inst)
	if r == nil {
		return
	}
	n, _ := strconv.Atoi(m[3])
	i, ok := r.Issues[n]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
		return
	}
	in.apply(&i.Title, &i.Body, &i.State)
	writeJSON(w, http.StatusOK, f.issueJSON(r, i))
}

func (f *Fake) addLabels(w http.ResponseWriter, req *http.Request, m []string, inst int64) {
	// GitHub takes {"labels": [...]} or the bare list.
	var raw json.RawMessage
	if !readJSON(w, req, &raw) {
		return
	}
	var in struct{ Labels []string }
	if err := json.Unmarshal(raw, &in.Labels); err != nil {
		if err := json.Unmarshal(raw, &in); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON"})
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repo(w, m[1], m[2], inst)
	if r == nil {
		return
	}
	n, _ := strconv.Atoi(m[3])
	var labels *[]string
	if p, ok := r.Pulls[n]; ok {
		labels = &p.Labels
	} else if i, ok := r.Issues[n]; ok {
		labels = &i.Labels
	} else {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
		return
	}
	for _, l := range in.Labels {
		found := false
		for _, x := range *labels {
			found = found || x == l
		}
		if !found {
			*labels = append(*labels, l)
		}
	}
	out := []map[string]any{}
	for _, l := range *labels {
		out = append(out, map[string]any{"name": l})
	}
	writeJSON(w, http.StatusOK, out)
}

// SetPermission gives a user a permission on a repository: admin,
// maintain, write, triage, read or none.
func (f *Fake) SetPermission(repo, user, permission string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repos[repo].Permissions[user] = permission
}

// EditIssue changes an issue's body as a person does in the browser (a
// ticked box), and returns the body before.
func (f *Fake) EditIssue(repo string, number int, edit func(string) string) (before string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := f.repos[repo].Issues[number]
	before = i.Body
	i.Body = edit(i.Body)
	return before
}

// SetIssueState closes or reopens an issue as a person does.
func (f *Fake) SetIssueState(repo string, number int, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repos[repo].Issues[number].State = state
}
