package db

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// encodeUUIDs sends a uuid.UUID argument as its 16 bytes. Without it pgx takes the type's
// driver.Valuer: the UUID's text, which the uuid codec refuses (an error built with
// fmt.Errorf), then parses to bytes and encodes again. That was a fifth of a JSON status
// read's allocations, for each uuid argument of every query (BENCHMARKS.md). Where the
// parameter is not a uuid (text, say), the wrapped value finds no plan and pgx goes on to the
// Valuer as before.
func encodeUUIDs(m *pgtype.Map) {
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryWrapUUID}, m.TryWrapEncodePlanFuncs...)
}

// uuidValue is a uuid.UUID as pgx's uuid codec takes it.
type uuidValue uuid.UUID

func (u uuidValue) UUIDValue() (pgtype.UUID, error) { return pgtype.UUID{Bytes: u, Valid: true}, nil }

func tryWrapUUID(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	if u, ok := value.(uuid.UUID); ok {
		return &uuidPlan{}, uuidValue(u), true
	}
	return nil, nil, false
}

type uuidPlan struct{ next pgtype.EncodePlan }

func (p *uuidPlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *uuidPlan) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode(uuidValue(value.(uuid.UUID)), buf)
}
