/** uc_jupyter's JupyterLab extension: the plugins, nothing else. */
import { JupyterFrontEndPlugin } from '@jupyterlab/application';

import { catalogPlugin } from './catalogPlugin';
import { poolStatusPlugin } from './poolStatus';

const plugins: JupyterFrontEndPlugin<void>[] = [catalogPlugin, poolStatusPlugin];

export default plugins;
