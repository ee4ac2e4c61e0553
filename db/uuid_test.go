package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"sandman/db/dbtest"
)

// A uuid.UUID goes to the database and comes back as the same uuid whatever the database's
// type (uuid, text) and NULL or not, and a uuid travels as its 16 bytes (two allocations to
// send one, none to read one), not its text parsed back (db.uuidsAsBytes).
func TestUUIDsTravelAsTheirBytes(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	id := uuid.New()
	var asUUID, asText string
	var isNull bool
	if err := pool.QueryRow(ctx, "SELECT $1::uuid::text, $2::text, $3::uuid IS NULL", id, id, (*uuid.UUID)(nil)).
		Scan(&asUUID, &asText, &isNull); err != nil {
		t.Fatal(err)
	}
	if asUUID != id.String() || asText != id.String() || !isNull {
		t.Fatalf("sent %s as a uuid, as text and a nil one: the database read %s, %s, NULL %v", id, asUUID, asText, isNull)
	}
	var fromUUID, fromText, fromNull uuid.UUID
	var nullable = &id
	if err := pool.QueryRow(ctx, "SELECT $1::uuid, $1::uuid::text, NULL::uuid, NULL::uuid", id.String()).
		Scan(&fromUUID, &fromText, &fromNull, &nullable); err != nil {
		t.Fatal(err)
	}
	if fromUUID != id || fromText != id || fromNull != uuid.Nil || nullable != nil {
		t.Fatalf("read %s as a uuid, as text, a NULL and a NULL into a pointer: %s, %s, %s, %v", id, fromUUID, fromText, fromNull, nullable)
	}

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	m := conn.Conn().TypeMap()
	buf := make([]byte, 0, 64)
	if allocs := testing.AllocsPerRun(100, func() {
		if _, err := m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id, buf); err != nil {
			t.Fatal(err)
		}
	}); allocs > 2 {
		t.Fatalf("sending a uuid.UUID makes %.0f allocations, want at most 2: it went through its text (driver.Valuer), not its bytes", allocs)
	}
	var got uuid.UUID
	plan := m.PlanScan(pgtype.UUIDOID, pgtype.BinaryFormatCode, &got)
	if allocs := testing.AllocsPerRun(100, func() {
		if err := plan.Scan(id[:], &got); err != nil {
			t.Fatal(err)
		}
	}); allocs > 0 || got != id {
		t.Fatalf("reading a uuid into a uuid.UUID made %.0f allocations (want none: through its text, sql.Scanner, it makes some) and read %s, want %s", allocs, got, id)
	}
}
