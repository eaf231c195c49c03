/*
 * processor.h: the C API of libgrove_processor.so, Grove as a DeepRec
 * serving processor. The declarations are DeepRec's
 * (serving/processor/serving/processor.h); docs/deeprec.md describes them.
 *
 * Memory: every buffer the library returns (*output_data, output_data[i])
 * is allocated with malloc; the caller frees it with free(). The library
 * copies its inputs before it returns and keeps no pointer to them.
 *
 * Threads: every function may be called from any number of threads at
 * once, on one handle or several.
 *
 * Process-wide: one Go runtime serves every handle, so grove_gomaxprocs
 * (and omp_num_threads) set by the last initialize apply to all. Each
 * handle's model cache ($TMPDIR/grove-processor-*) is removed when the
 * process exits through exit() or a return from main.
 */
#ifndef GROVE_PROCESSOR_H_
#define GROVE_PROCESSOR_H_

#ifdef __cplusplus
extern "C" {
#endif

/* initialize starts a processor for the model directory model_config (a
 * DeepRec model config JSON) names and waits until the model serves (at
 * most init_timeout_minutes). model_entry is put in front of
 * warmup_file_name, as in DeepRec ("" for none; not NULL). On success
 * *state is 0 and the handle is returned; on failure *state is -1, NULL
 * is returned and the reason is logged on stderr. */
void* initialize(const char* model_entry, const char* model_config, int* state);

/* process runs one serialized tensorflow.eas.PredictRequest and returns
 * 200 with a serialized PredictResponse in *output_data, or 500 with the
 * error text. input_size 0 returns the model's signature as JSON. */
int process(void* model_buf, const void* input_data, int input_size,
            void** output_data, int* output_size);

/* batch_process runs input_data[0..n-1] as process does, where n is the
 * number of entries before the first NULL in input_data (end the array
 * with a NULL). input_size, output_data and output_size have n entries.
 * It returns 200 when every input returned 200, else 500; each
 * output_data[i] holds that input's response or error text. */
int batch_process(void* model_buf, const void* input_data[], int* input_size,
                  void* output_data[], int* output_size);

/* get_serving_model_info returns 200 with a serialized
 * tensorflow.eas.ServingModelInfo of the version serving now: model_path
 * (the version's directory), and Grove's version and checksum. */
int get_serving_model_info(void* model_buf, void** output_data, int* output_size);

#ifdef __cplusplus
}
#endif

#endif  /* GROVE_PROCESSOR_H_ */
