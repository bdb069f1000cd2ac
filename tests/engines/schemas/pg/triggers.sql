-- Triggers of every shape: row and statement, WHEN, UPDATE OF, transition tables, constraint triggers,
-- INSTEAD OF on a view, disabled triggers, and an event trigger.
CREATE SCHEMA shop;
CREATE TABLE shop.item (id integer PRIMARY KEY, qty integer NOT NULL DEFAULT 0, price numeric, changed_at timestamptz);
CREATE TABLE shop.item_log (at timestamptz DEFAULT now(), item_id integer, old_qty integer, new_qty integer);
CREATE FUNCTION shop.log_qty() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO shop.item_log (item_id, old_qty, new_qty) VALUES (NEW.id, OLD.qty, NEW.qty);
  RETURN NEW;
END $$;
CREATE FUNCTION shop.stamp() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.changed_at := now(); RETURN NEW; END $$;
CREATE FUNCTION shop.count_new() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM count(*) FROM new_rows; RETURN NULL; END $$;
CREATE FUNCTION shop.check_qty() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.qty < 0 THEN RAISE EXCEPTION 'negative'; END IF; RETURN NULL; END $$;
CREATE FUNCTION shop.view_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO shop.item (id, qty) VALUES (NEW.id, NEW.qty); RETURN NEW; END $$;
CREATE FUNCTION shop.on_ddl() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN RAISE NOTICE 'ddl: %', tg_tag; END $$;
CREATE TRIGGER item_log AFTER UPDATE OF qty ON shop.item FOR EACH ROW WHEN (OLD.qty IS DISTINCT FROM NEW.qty) EXECUTE FUNCTION shop.log_qty();
CREATE TRIGGER item_stamp BEFORE INSERT OR UPDATE ON shop.item FOR EACH ROW EXECUTE FUNCTION shop.stamp();
CREATE TRIGGER item_batch AFTER INSERT ON shop.item REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION shop.count_new();
CREATE CONSTRAINT TRIGGER item_qty_check AFTER INSERT OR UPDATE ON shop.item DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION shop.check_qty();
CREATE TRIGGER item_stamp_off BEFORE DELETE ON shop.item FOR EACH ROW EXECUTE FUNCTION shop.stamp();
ALTER TABLE shop.item DISABLE TRIGGER item_stamp_off;
CREATE VIEW shop.item_view AS SELECT id, qty FROM shop.item;
CREATE TRIGGER item_view_insert INSTEAD OF INSERT ON shop.item_view FOR EACH ROW EXECUTE FUNCTION shop.view_insert();
CREATE EVENT TRIGGER shop_ddl ON ddl_command_end WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE') EXECUTE FUNCTION shop.on_ddl();
COMMENT ON EVENT TRIGGER shop_ddl IS 'Says what changed';
COMMENT ON CONSTRAINT item_qty_check ON shop.item IS 'Deferred check';
