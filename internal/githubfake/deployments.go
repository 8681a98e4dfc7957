package githubfake

import (
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Deployment is a deployment of a commit to an environment, as GitHub keeps
// it, with its statuses, oldest first.
type Deployment struct {
	ID          int64
	Repo        string
	SHA         string
	Ref         string
	Environment string
	Description string
	// Creator is the login that created it.
	Creator  string
	Created  time.Time
	Statuses []DeploymentStatus
}

// DeploymentStatus is one status of a deployment.
type DeploymentStatus struct {
	ID          int64
	State       string
	Description string
	Environment string
	Created     time.Time
}

// deploymentStates are the states GitHub accepts for a deployment status.
var deploymentStates = []string{"error", "failure", "inactive", "in_progress", "queued", "pending", "success"}

// Deployments returns a repository's deployments, oldest first.
func (f *Fake) Deployments(repo string) []Deployment {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Deployment
	for _, d := range f.deployments {
		if d.Repo == repo {
			c := *d
			c.Statuses = slices.Clone(d.Statuses)
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Deployment) int { return int(a.ID - b.ID) })
	return out
}

func deploymentJSON(d *Deployment) map[string]any {
	return map[string]any{"id": d.ID, "sha": d.SHA, "ref": d.Ref, "task": "deploy", "environment": d.Environment,
		"description": d.Description, "creator": map[string]any{"login": d.Creator, "type": "Bot"},
		"created_at": d.Created.Format(time.RFC3339), "updated_at": d.Created.Format(time.RFC3339)}
}

func deploymentStatusJSON(s DeploymentStatus) map[string]any {
	return map[string]any{"id": s.ID, "state": s.State, "description": s.Description, "environment": s.Environment,
		"created_at": s.Created.Format(time.RFC3339), "updated_at": s.Created.Format(time.RFC3339)}
}

// listDeployments answers GET /repos/{owner}/{repo}/deployments, newest
// first, filtered by sha, ref and environment as GitHub filters them.
func (f *Fake) listDeployments(w http.ResponseWriter, req *http.Request, m []string, inst int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repo(w, m[1], m[2], inst)
	if r == nil {
		return
	}
	q := req.URL.Query()
	var out []map[string]any
	for _, d := range f.deployments {
		if d.Repo != r.Owner+"/"+r.Name || q.Get("sha") != "" && q.Get("sha") != d.SHA ||
			q.Get("environment") != "" && q.Get("environment") != d.Environment || q.Get("ref") != "" && q.Get("ref") != d.Ref {
			continue
		}
		out = append(out, deploymentJSON(d))
	}
	slices.SortFunc(out, func(a, b map[string]any) int { return int(b["id"].(int64) - a["id"].(int64)) })
	writeJSON(w, http.StatusOK, out)
}

// createDeployment answers POST /repos/{owner}/{repo}/deployments. The
// environment defaults to "production", as GitHub's does.
func (f *Fake) createDeployment(w http.ResponseWriter, req *http.Request, m []string, inst int64) {
	var in struct {
		Ref              string    `json:"ref"`
		Environment      *string   `json:"environment"`
		Description      string    `json:"description"`
		RequiredContexts *[]string `json:"required_contexts"`
	}
	if !readJSON(w, req, &in) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repo(w, m[1], m[2], inst)
	if r == nil {
		return
	}
	if in.Ref == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed"})
		return
	}
	if in.RequiredContexts == nil || len(*in.RequiredContexts) > 0 {
		// Every status check must pass first unless the request names none:
		// a merge commit's checks have not run.
		writeJSON(w, http.StatusConflict, map[string]any{"message": "Conflict: Commit status checks failed for " + in.Ref + "."})
		return
	}
	env := "production"
	if in.Environment != nil {
		env = *in.Environment
	}
	f.nextID++
	login, _, _ := f.writer(req)
	d := &Deployment{ID: f.nextID, Repo: r.Owner + "/" + r.Name, SHA: in.Ref, Ref: in.Ref, Environment: env, Description: in.Description, Creator: login, Created: time.Now().UTC()}
	f.deployments[d.ID] = d
	writeJSON(w, http.StatusCreated, deploymentJSON(d))
}

// listDeploymentStatuses answers GET
// /repos/{owner}/{repo}/deployments/{id}/statuses, newest first.
func (f *Fake) listDeploymentStatuses(w http.ResponseWriter, req *http.Request, m []string, inst int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.deployment(w, m, inst)
	if d == nil {
		return
	}
	out := []map[string]any{}
	for i := len(d.Statuses) - 1; i >= 0; i-- {
		out = append(out, deploymentStatusJSON(d.Statuses[i]))
	}
	writeJSON(w, http.StatusOK, out)
}

// createDeploymentStatus answers POST
// /repos/{owner}/{repo}/deployments/{id}/statuses, refusing what GitHub
// refuses: an unknown state, a description over 140 characters.
func (f *Fake) createDeploymentStatus(w http.ResponseWriter, req *http.Request, m []string, inst int64) {
	var in struct {
		State       string `json:"state"`
		Description string `json:"description"`
		Environment string `json:"environment"`
	}
	if !readJSON(w, req, &in) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.deployment(w, m, inst)
	if d == nil {
		return
	}
	if !slices.Contains(deploymentStates, in.State) || len([]rune(in.Description)) > 140 {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed"})
		return
	}
	env := d.Environment
	if in.Environment != "" {
		env = in.Environment
	}
	f.nextID++
	s := DeploymentStatus{ID: f.nextID, State: in.State, Description: in.Description, Environment: env, Created: time.Now().UTC()}
	d.Statuses = append(d.Statuses, s)
	writeJSON(w, http.StatusCreated, deploymentStatusJSON(s))
}

func (f *Fake) deployment(w http.ResponseWriter, m []string, inst int64) *Deployment {
	r := f.repo(w, m[1], m[2], inst)
	if r == nil {
		return nil
	}
	id, _ := strconv.ParseInt(m[3], 10, 64)
	d, ok := f.deployments[id]
	if !ok || d.Repo != r.Owner+"/"+r.Name {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
		return nil
	}
	return d
}
