package db

import (
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// uuidsAsBytes makes pgx send and read a uuid.UUID as its 16 bytes. Without it pgx takes the
// type's database/sql methods: an argument's Value is its text, which the uuid codec refuses
// (an error built with fmt.Errorf) before parsing it back, and a column is formatted as text
// for Scan to parse. That was a fifth of a JSON status read's allocations and some two
// hundred of a dashboard's (BENCHMARKS.md). Where the database's type is not a uuid (text,
// say), the wrapped value finds no plan and pgx goes on to the database/sql methods as before;
// a uuid read into anything but a uuid.UUID is read as before too.
func uuidsAsBytes(m *pgtype.Map) {
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryWrapUUIDValue}, m.TryWrapEncodePlanFuncs...)
	m.RegisterType(&pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}})
}

// uuidBytes is a uuid.UUID as pgx's uuid codec takes it.
type uuidBytes uuid.UUID

func (u uuidBytes) UUIDValue() (pgtype.UUID, error) { return pgtype.UUID{Bytes: u, Valid: true}, nil }

func tryWrapUUIDValue(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	if u, ok := value.(uuid.UUID); ok {
		return &uuidEncodePlan{}, uuidBytes(u), true
	}
	return nil, nil, false
}

type uuidEncodePlan struct{ next pgtype.EncodePlan }

func (p *uuidEncodePlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *uuidEncodePlan) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode(uuidBytes(value.(uuid.UUID)), buf)
}

// uuidCodec is pgx's uuid codec that also reads a column into a uuid.UUID from its bytes: pgx
// asks a sql.Scanner (uuid.UUID is one) before any wrapper, so only the codec comes first.
type uuidCodec struct{ pgtype.UUIDCodec }

func (c uuidCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*uuid.UUID); ok && format == pgtype.BinaryFormatCode {
		return uuidScanPlan{}
	}
	return c.UUIDCodec.PlanScan(m, oid, format, target)
}

type uuidScanPlan struct{}

func (uuidScanPlan) Scan(src []byte, dst any) error {
	if src == nil {
		return nil // a NULL leaves the target as it is, as uuid.UUID's Scan does
	}
	if len(src) != 16 {
		return fmt.Errorf("a uuid of %d bytes", len(src))
	}
	copy(dst.(*uuid.UUID)[:], src)
	return nil
}
