declare module "cloudflare:test" {
  interface ProvidedEnv extends Env {
    /** test/global-setup.ts smallDisk, as JSON */
    TEST_SMALL_DISK: string;
  }
}
