// The agent's answers about the file-level format (POST /v1/files/pack, /v1/files/unpack), parsed by the Worker
// with the agent protocol's own schemas before it acts on them (the route parsed the engine's answer already; the
// Worker does not take the agent's word that it did).
import type { z } from "zod";
import { FilesPackResult, FilesUnpackResult } from "../../container/contract/protocol.ts";

export const FilesPackAnswer = FilesPackResult;
export type FilesPackAnswer = z.infer<typeof FilesPackAnswer>;
export const FilesUnpackAnswer = FilesUnpackResult;
export type FilesUnpackAnswer = z.infer<typeof FilesUnpackAnswer>;
