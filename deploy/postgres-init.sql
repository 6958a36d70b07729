-- Hindsight keeps its own database beside Engram's, on the same server.
CREATE DATABASE hindsight;
\connect hindsight
CREATE EXTENSION IF NOT EXISTS vector;
