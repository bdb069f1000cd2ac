-- Table inheritance and rules, as older sample schemas partition by hand (pagila 0.10 style):
-- children INHERITS the parent and add CHECKs, rules route inserts, a view has a rule.
CREATE TABLE public.payment (
    payment_id serial PRIMARY KEY,
    customer_id smallint NOT NULL,
    amount numeric(5,2) NOT NULL CHECK (amount >= 0),
    payment_date timestamp without time zone NOT NULL
);
CREATE TABLE public.payment_p2007_01 (
    CONSTRAINT payment_p2007_01_payment_date_check CHECK (payment_date >= '2007-01-01' AND payment_date < '2007-02-01')
) INHERITS (public.payment);
CREATE TABLE public.payment_p2007_02 (
    note text,
    CONSTRAINT payment_p2007_02_payment_date_check CHECK (payment_date >= '2007-02-01' AND payment_date < '2007-03-01')
) INHERITS (public.payment);
CREATE INDEX idx_fk_payment_p2007_01_customer_id ON public.payment_p2007_01 (customer_id);
CREATE RULE payment_insert_p2007_01 AS ON INSERT TO public.payment
    WHERE new.payment_date >= '2007-01-01' AND new.payment_date < '2007-02-01'
    DO INSTEAD INSERT INTO public.payment_p2007_01 VALUES (DEFAULT, new.customer_id, new.amount, new.payment_date);
CREATE RULE payment_insert_p2007_02 AS ON INSERT TO public.payment
    WHERE new.payment_date >= '2007-02-01' AND new.payment_date < '2007-03-01'
    DO INSTEAD INSERT INTO public.payment_p2007_02 VALUES (DEFAULT, new.customer_id, new.amount, new.payment_date);
CREATE TABLE public.tagged (id integer PRIMARY KEY);
CREATE TABLE public.audited (at timestamptz DEFAULT now());
CREATE TABLE public.tagged_audited (label text) INHERITS (public.tagged, public.audited);
CREATE VIEW public.recent_payments AS SELECT payment_id, amount FROM public.payment;
CREATE RULE recent_payments_delete AS ON DELETE TO public.recent_payments DO INSTEAD NOTHING;
CREATE RULE payment_no_update AS ON UPDATE TO public.payment_p2007_02 DO ALSO NOTIFY payments;
ALTER TABLE public.payment_p2007_02 DISABLE RULE payment_no_update;
COMMENT ON RULE payment_insert_p2007_01 ON public.payment IS 'Route January';
