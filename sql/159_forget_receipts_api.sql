-- A forget asked over the HTTP API (issue 41) has its own origin on the receipt.
ALTER TABLE forget_receipts DROP CONSTRAINT forget_receipts_who_known,
    ADD CONSTRAINT forget_receipts_who_known
        CHECK (who IN ('guardian command', 'cli', 'conversation', 'correction', 'api'));
