package githubfake

import (
	"encoding/json"
	"net/http"
	"slices"
)

// SetUser makes a GitHub user known by login, with their numeric ID (GET
// /users/{login}); an unknown login is 404, as on GitHub.
func (f *Fake) SetUser(login string, id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.users == nil {
		f.users = map[string]int64{}
	}
	f.users[login] = id
}

// Reviewers are the users a pull request's review was requested from.
func (f *Fake) Reviewers(repo string, number int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.repos[repo]; r != nil && r.Pulls[number] != nil {
		return slices.Clone(r.Pulls[number].Reviewers)
	}
	return nil
}

func (f *Fake) getUserByLogin(w http.ResponseWriter, _ *http.Request, m []string, _ int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.users[m[1]]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"login": m[1], "id": id, "type": "User"})
}

// requestReviewers asks for reviews as GitHub does: only from users who
// may read the repository (422 otherwise), never from the author.
func (f *Fake) requestReviewers(w http.ResponseWriter, req *http.Request, m []string, inst int64) {
	var body struct {
		Reviewers []string `json:"reviewers"`
	}
	if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON"})
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r, p := f.pull(w, m, inst)
	if p == nil {
		return
	}
	for _, u := range body.Reviewers {
		if perm := r.Permissions[u]; perm == "" || perm == "none" || u == p.User {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Reviews may only be requested from collaborators. One or more of the users or teams you specified is not a collaborator of the " + r.Owner + "/" + r.Name + " repository."})
			return
		}
	}
	for _, u := range body.Reviewers {
		if !slices.Contains(p.Reviewers, u) {
			p.Reviewers = append(p.Reviewers, u)
		}
	}
	writeJSON(w, http.StatusCreated, f.pullJSON(r, p))
}
