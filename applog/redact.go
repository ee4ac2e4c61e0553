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
	// starts has a bit for the first two bytes of each secret: most lines hold none of them,
	// and one pass over a line's pairs of bytes tells so.
	starts *[1 << 16 / 64]uint64
	// byStart are the secrets by their first two bytes, the longest first, so that a secret
	// that holds another is replaced whole.
	byStart map[uint16][]secretValue
}

type secretValue struct{ value, replacement string }

func pairAt(s string, i int) uint16 { return uint16(s[i])<<8 | uint16(s[i+1]) }

// NewRedactor returns the Redactor of secrets (name to value); nil when none is long enough.
func NewRedactor(secrets map[string]string) *Redactor {
	r := &Redactor{starts: new([1 << 16 / 64]uint64), byStart: map[uint16][]secretValue{}}
	for n, v := range secrets {
		if len(v) < MinSecretLen {
			continue
		}
		k := pairAt(v, 0)
		r.starts[k/64] |= 1 << (k % 64)
		r.byStart[k] = append(r.byStart[k], secretValue{v, "[secret " + n + "]"})
	}
	if len(r.byStart) == 0 {
		return nil
	}
	for _, vs := range r.byStart {
		slices.SortFunc(vs, func(a, b secretValue) int {
			return cmp.Or(cmp.Compare(len(b.value), len(a.value)), strings.Compare(a.replacement, b.replacement))
		})
	}
	return r
}

// Redact returns text with every secret value replaced.
func (r *Redactor) Redact(text string) string {
	if r == nil {
		return text
	}
	var b strings.Builder
	done := 0 // text[:done] is in b
	for i := 0; i+1 < len(text); {
		k := pairAt(text, i)
		if r.starts[k/64]&(1<<(k%64)) == 0 {
			i++
			continue
		}
		matched := false
		for _, sv := range r.byStart[k] {
			if strings.HasPrefix(text[i:], sv.value) {
				b.WriteString(text[done:i])
				b.WriteString(sv.replacement)
				i += len(sv.value)
				done, matched = i, true
				break
			}
		}
		if !matched {
			i++
		}
	}
	if done == 0 {
		return text
	}
	b.WriteString(text[done:])
	return b.String()
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
