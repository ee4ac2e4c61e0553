package applog

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Redaction (docs/architecture.md, "Environment variables"): every secret value of a project of
// MinSecretLen bytes or more is replaced by "[secret NAME]" in its apps' output before a line is
// stored, so neither the log, its streams nor the problems read from it ever hold one. Shorter
// values are left: replacing "1" or "true" everywhere would make the log unreadable and protect
// nothing.

// MinSecretLen is the shortest secret value replaced in output.
const MinSecretLen = 6

// Secrets opens the secret variables of projects, name to value by project (envvars.SecretsOf).
type Secrets func(ctx context.Context, projectIDs []uuid.UUID) (map[uuid.UUID]map[string]string, error)

// Redactor replaces one project's secret values in text. A nil *Redactor replaces nothing.
type Redactor struct {
	r *strings.Replacer
	// starts has a bit for the first two bytes of each secret: most lines hold none of them,
	// and one pass over a line's pairs of bytes tells so, faster than the replacer's search.
	starts *[1 << 16 / 64]uint64
}

// NewRedactor returns the Redactor of secrets (name to value); nil when none is long enough.
func NewRedactor(secrets map[string]string) *Redactor {
	type pair struct{ name, value string }
	var ps []pair
	for n, v := range secrets {
		if len(v) >= MinSecretLen {
			ps = append(ps, pair{n, v})
		}
	}
	if len(ps) == 0 {
		return nil
	}
	// The longest first: the replacer tries its pairs in order at each position, so a secret
	// that holds another is replaced whole.
	slices.SortFunc(ps, func(a, b pair) int {
		return cmp.Or(cmp.Compare(len(b.value), len(a.value)), strings.Compare(a.name, b.name))
	})
	args := make([]string, 0, 2*len(ps))
	for _, p := range ps {
		args = append(args, p.value, "[secret "+p.name+"]")
	}
	red := &Redactor{r: strings.NewReplacer(args...), starts: new([1 << 16 / 64]uint64)}
	for _, p := range ps {
		k := uint16(p.value[0])<<8 | uint16(p.value[1])
		red.starts[k/64] |= 1 << (k % 64)
	}
	return red
}

// Redact returns text with every secret value replaced.
func (r *Redactor) Redact(text string) string {
	if r == nil {
		return text
	}
	for i := 0; i+1 < len(text); i++ {
		k := uint16(text[i])<<8 | uint16(text[i+1])
		if r.starts[k/64]&(1<<(k%64)) != 0 {
			return r.r.Replace(text)
		}
	}
	return text
}

// redactors are the Writer's Redactors by run: a run's process has the variables of its start,
// so its secrets are read once, when its first lines are written, for all the new runs of a
// batch in one query.
type redactors struct {
	secrets Secrets
	byRun   map[uuid.UUID]*runRedactor
}

type runRedactor struct {
	r    *Redactor
	used time.Time
}

// redact replaces the secrets in batch's lines, reading those of runs not seen yet.
func (rs *redactors) redact(ctx context.Context, batch []Line, now time.Time) error {
	if rs.secrets == nil {
		return nil
	}
	var missing []uuid.UUID
	newRuns := map[uuid.UUID]uuid.UUID{}
	for _, l := range batch {
		if _, ok := rs.byRun[l.Run.ID]; !ok {
			if _, ok := newRuns[l.Run.ID]; !ok {
				newRuns[l.Run.ID] = l.Run.ProjectID
				missing = append(missing, l.Run.ProjectID)
			}
		}
	}
	if len(missing) > 0 {
		slices.SortFunc(missing, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
		secrets, err := rs.secrets(ctx, slices.Compact(missing))
		if err != nil {
			return err
		}
		for run, project := range newRuns {
			rs.byRun[run] = &runRedactor{r: NewRedactor(secrets[project])}
		}
	}
	for i := range batch {
		e := rs.byRun[batch[i].Run.ID]
		e.used = now
		batch[i].Text = e.r.Redact(batch[i].Text)
	}
	for id, e := range rs.byRun {
		if now.Sub(e.used) > time.Minute {
			delete(rs.byRun, id) // a run silent for a minute is read again if it prints
		}
	}
	return nil
}

// redactor is one project's Redactor, read now (nil without secrets).
func (w *Writer) redactor(ctx context.Context, project uuid.UUID) (*Redactor, error) {
	if w == nil || w.redact.secrets == nil {
		return nil, nil
	}
	secrets, err := w.redact.secrets(ctx, []uuid.UUID{project})
	if err != nil {
		return nil, err
	}
	return NewRedactor(secrets[project]), nil
}
